#!/usr/bin/env bash
# On the device machine (device tool, `run` verb), from the repo root, with carry [".carry"]
# prepared here by packages/kernels/device/prepare-carry.sh: the worker-thread decoder against one
# thread (bench/measure-worker-decoder.mjs) on an otherwise idle host, pinned to 2 cores with
# taskset (the "2 cores"; this repo's own 2-core machine is shared and loaded), and
# unpinned with the default pool for comparison. CPU only: no GPU is used.
#   bash packages/kernels/device/run-worker-bench.sh [rounds] [log2 sizes...]
set -euo pipefail
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
cp packages/kernels/bench/measure-worker-decoder.mjs "$K/bench/"
echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
cd "$K"
echo "== pinned: taskset -c 0,1"
taskset -c 0,1 "$WORK/node" bench/measure-worker-decoder.mjs "$ROUNDS" $SIZES 2>&1 | tee "${OUT:-/tmp}/worker-2-cores.txt"
echo "== unpinned, default pool"
"$WORK/node" bench/measure-worker-decoder.mjs "$ROUNDS" $SIZES 2>&1 | tee "${OUT:-/tmp}/worker-all-cores.txt"
