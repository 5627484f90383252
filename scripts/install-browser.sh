#!/usr/bin/env bash
# Debian's chromium gives gpu.js real WebGL2/WebGL/WebGPU (SwiftShader) for the GPU-backend tests.
# Never `playwright install`: it downloads its own browser, which this network refuses.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" != 0 ]; then echo "install-browser: need root to apt-get install chromium" >&2; exit 1; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 chromium >&2
