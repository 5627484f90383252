#!/usr/bin/env bash
# The main job on the built-in default model: build its compressed shard cache, verify the cache
# against the model (every tensor found by slice and content key, bit-identical, or not cached for
# a stated reason), print the reports, then load the whole model back through the runtime and
# check every tensor bit-identical. Installs what it needs and builds first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh
pnpm exec turbo run build --filter=@splitzip/builder... --filter=@splitzip/runtime... --output-logs=errors-only >&2

model_dir=$(node tooling/default-model/bin/ensure-default-model.mjs)
model="$model_dir/model.safetensors.index.json"
cache_dir=.cache/default-cache   # git-ignored (/.cache/); re-runs find every entry and write nothing

echo "== splitzip build $model --out $cache_dir"
node apps/builder/dist/cli.js build "$model" --out "$cache_dir"
echo
echo "== splitzip verify $cache_dir --model $model"
node apps/builder/dist/cli.js verify "$cache_dir" --model "$model"
echo
echo "== load the whole model back through @splitzip/runtime loadModel (cache vs raw), bit-exact check"
node apps/runtime/bin/load-default-model.mjs --model "$model" --cache "$cache_dir"
