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

# The store's S3 tests run against a throwaway Ceph RADOS Gateway on 127.0.0.1 (scripts/ceph/),
# stopped by PID whatever happens; its AWS_* variables are exported for the tests.
CEPH_DIR=""
stop_ceph() { if [ -n "$CEPH_DIR" ]; then bash scripts/ceph/stop-ceph.sh "$CEPH_DIR" >&2; fi; }
trap stop_ceph EXIT
trap 'exit 130' INT TERM
if bash scripts/ceph/install-ceph.sh && CEPH_DIR="$(bash scripts/ceph/start-ceph.sh)"; then
  # shellcheck disable=SC1091
  source "$CEPH_DIR/env"
else
  CEPH_DIR=""
  echo "test: the Ceph S3 gateway could not be started; the store's S3 tests will fail" >&2
fi
pnpm exec turbo run test --concurrency=1 --continue
test_rc=$?
stop_ceph >&2 2>&1 || true
CEPH_DIR=""

node scripts/summarize-tests.mjs --build-rc "$build_rc" --test-rc "$test_rc"
