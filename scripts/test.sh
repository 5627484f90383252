#!/usr/bin/env bash
# Runs every test of the monorepo and ends with one plain line "N passed, N failed".
# Installs what it needs (pnpm, dependencies, the headless browser for GPU-backend tests).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/bootstrap.sh || { echo "0 passed, 1 failed"; exit 1; }
bash scripts/install-browser.sh || echo "test: headless browser unavailable; browser tests will report it" >&2

# Stale results from an earlier run must not be counted.
find packages apps tooling -name .vitest-result.json -not -path '*/node_modules/*' -delete 2>/dev/null

pnpm exec turbo run build --output-logs=errors-only
build_rc=$?
pnpm exec turbo run test --concurrency=1 --continue
test_rc=$?

node scripts/summarize-tests.mjs --build-rc "$build_rc" --test-rc "$test_rc"
