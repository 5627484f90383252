#!/usr/bin/env bash
# On the device machine (device tool, `run` verb), from the repo root, with carry [".carry"]
# prepared here by packages/kernels/device/prepare-carry.sh: the worker-thread decoder against one
# thread (bench/measure-worker-decoder.mjs) on an otherwise idle host, pinned to 2 cores with
# taskset (the "2 cores"; this repo's own 2-core machine is shared and loaded), and
# unpinned with the default pool for comparison. CPU only: no GPU is used.
#   bash packages/kernels/device/run-worker-bench.sh [rounds] [log2 sizes...]
# A/B against a baseline build packed into the carried app as node_modules/@splitzip/kernels-old
# (dist and package.json of the older kernels, added to kernels-app.tar.xz by hand): both builds in
# the same rounds, pinned (measure-worker-decoder.mjs --baseline, cold in-arena rows, verified and
# off, AB_ROUNDS rounds; then the current build against itself, the noise floor), then the whole pinned table of the current build.
# The second copy is itself 30-45% slower (two module instances): compare a change against a copy of the
# unchanged build run the same way (RESULTS.md, 2026-12-07), not against the current build's own rows:
#   bash packages/kernels/device/run-worker-bench.sh ab [ab-rounds] [rounds] [log2 sizes...]
set -euo pipefail
AB=0
if [ "${1:-}" = ab ]; then
  AB=1
  AB_ROUNDS="${2:-201}"
  shift 2 || true
fi
ROUNDS="${1:-21}"
shift || true
SIZES="${*:-20 22 24 26}"
WORK=/tmp/splitzip-kernels
mkdir -p "$WORK"
xz -dc .carry/node.xz > "$WORK/node"
chmod +x "$WORK/node"
tar -xJf .carry/kernels-app.tar.xz -C "$WORK"
K="$WORK/app/node_modules/@splitzip/kernels"
mkdir -p "$K/bench"
cp packages/kernels/bench/measure-worker-decoder.mjs packages/kernels/bench/measure-copy-scaling.mjs "$K/bench/"
echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
cd "$K"
if [ "$AB" = 1 ]; then
  OLD="$WORK/app/node_modules/@splitzip/kernels-old"
  echo "== A/B, pinned: taskset -c 0,1 (load $(cut -d' ' -f1-3 /proc/loadavg))"
  taskset -c 0,1 "$WORK/node" bench/measure-worker-decoder.mjs "$AB_ROUNDS" $SIZES "--baseline=$OLD/dist/node.js" --checksum=split,off 2>&1 \
    | tee "${OUT:-/tmp}/worker-ab.txt"
  echo "== A/A (the current build against itself: the noise floor of the A/B), pinned, 2^24"
  taskset -c 0,1 "$WORK/node" bench/measure-worker-decoder.mjs "$AB_ROUNDS" 24 "--baseline=$K/dist/node.js" --checksum=split,off 2>&1 \
    | tee "${OUT:-/tmp}/worker-aa.txt"
  echo "== current build, pinned: taskset -c 0,1, every row"
  taskset -c 0,1 "$WORK/node" bench/measure-worker-decoder.mjs "$ROUNDS" $SIZES 2>&1 | tee "${OUT:-/tmp}/worker-2-cores.txt"
  exit 0
fi
echo "== pinned: taskset -c 0,1"
taskset -c 0,1 "$WORK/node" bench/measure-worker-decoder.mjs "$ROUNDS" $SIZES 2>&1 | tee "${OUT:-/tmp}/worker-2-cores.txt"
echo "== unpinned, default pool"
"$WORK/node" bench/measure-worker-decoder.mjs "$ROUNDS" $SIZES 2>&1 | tee "${OUT:-/tmp}/worker-all-cores.txt"
