#!/usr/bin/env bash
# Here (not on the device): builds the packages and packs what run-h200.sh needs into the
# git-ignored .carry/ folder: node.xz (this machine's /usr/bin/node, xz) and kernels-app.tar.xz
# (the built @splitzip/codec and @splitzip/kernels plus a flat, pruned node_modules: gpu.js
# as npm installs it, its deps, and webgpu with only the linux-x64 Dawn binary). Vulkan loader .debs go to
# .gl/ as the device README says.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
ROOT=$PWD
pnpm --filter @splitzip/codec build >/dev/null
pnpm --filter @splitzip/kernels build >/dev/null
mkdir -p .carry
[ -s .carry/node.xz ] || xz -T2 -6 -c /usr/bin/node > .carry/node.xz
# The Vulkan loader alone is not enough: the NVIDIA ICD (libGLX_nvidia.so.0) needs libglvnd's
# libraries too, or vkCreateInstance finds no driver (seen on the H200, 2026-12-02 23:25).
if ! ls .gl/libvulkan1_*.deb .gl/libglvnd0_*.deb .gl/libglx0_*.deb >/dev/null 2>&1; then
  mkdir -p .gl /tmp/amd64/partial
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  apt-get $o update >/dev/null
  (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
STAGE=$(mktemp -d)
APP=$STAGE/app
NM=$APP/node_modules
mkdir -p "$NM/@splitzip/codec" "$NM/@splitzip/kernels" "$NM/webgpu/dist"
cp -L packages/codec/package.json "$NM/@splitzip/codec/" && cp -rL packages/codec/dist "$NM/@splitzip/codec/"
cp -L packages/kernels/package.json "$NM/@splitzip/kernels/" && cp -rL packages/kernels/dist "$NM/@splitzip/kernels/"
KNM=packages/kernels/node_modules
GPUJS=$(readlink -f "$KNM/gpu.js")
mkdir -p "$NM/gpu.js" && cp -L "$GPUJS/package.json" "$NM/gpu.js/" && cp -rL "$GPUJS/src" "$NM/gpu.js/"
for dep in acorn gpu-mock.js; do cp -rL "$(readlink -f "$GPUJS/../$dep")" "$NM/$dep"; done
WEBGPU=$(readlink -f "$KNM/webgpu")
cp -L "$WEBGPU/package.json" "$WEBGPU/index.js" "$NM/webgpu/" && cp -L "$WEBGPU/dist/linux-x64.dawn.node" "$NM/webgpu/dist/"
tar -C "$STAGE" -cJf .carry/kernels-app.tar.xz app
rm -rf "$STAGE"
du -sh .carry/* .gl
