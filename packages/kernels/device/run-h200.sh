#!/usr/bin/env bash
# On the device machine (device tool, `run` verb), from the repo root, in ONE call:
#   bash packages/kernels/device/run-h200.sh smoke|full|checksum|readback|probe|profile|pieces   (probe: upload-probe.mjs;
#   profile: profile-device-resident.mjs, a CPU profile of the 2^26 device-resident decode;
#   pieces: tune-upload-pieces.mjs, the verified device-resident decode per upload piece size)
# with carry: [".carry", ".gl"] prepared here by packages/kernels/device/prepare-carry.sh.
# Sets up Node (carried xz binary), the Vulkan loader (.gl/*.deb), the built packages with a
# pruned node_modules, then runs h200-bench.mjs (checks + timings). Output also lands in $OUT.
set -euo pipefail
MODE="${1:-smoke}"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
WORK=/tmp/splitzip-kernels
mkdir -p "$WORK"
xz -dc .carry/node.xz > "$WORK/node"
chmod +x "$WORK/node"
tar -xJf .carry/kernels-app.tar.xz -C "$WORK"
cp packages/kernels/device/h200-bench.mjs packages/kernels/device/raw-bf16-upload.mjs packages/kernels/device/upload-probe.mjs packages/kernels/device/profile-device-resident.mjs packages/kernels/device/model-like-values.mjs packages/kernels/device/tune-upload-pieces.mjs "$WORK/app/"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
echo "vulkan loader: $(ldconfig -p | grep -c libvulkan) entries"
cd "$WORK/app"
SCRIPT=h200-bench.mjs
[ "$MODE" = probe ] && SCRIPT=upload-probe.mjs
[ "$MODE" = profile ] && SCRIPT=profile-device-resident.mjs
[ "$MODE" = pieces ] && SCRIPT=tune-upload-pieces.mjs
OUT="${OUT:-/tmp}" "$WORK/node" "$SCRIPT" "$MODE" 2>&1 | tee "${OUT:-/tmp}/h200-$MODE.txt"
exit "${PIPESTATUS[0]}"
