#!/usr/bin/env bash
# The main job on the built-in default data. Installs what it needs, builds, runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh
pnpm exec turbo run build --output-logs=errors-only >&2
node packages/codec/examples/demo.mjs
