#!/usr/bin/env bash
# Installs what the project needs on a fresh machine: pnpm (pinned; corepack cannot
# fetch here and pnpm 11 crashes on Node 20), then the workspace from the lockfile.
# Usage: source or run; idempotent and quick when everything is already there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PNPM_VERSION=10.34.9
if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version 2>/dev/null)" != "$PNPM_VERSION" ]; then
  echo "bootstrap: installing pnpm@$PNPM_VERSION" >&2
  npm install -g "pnpm@$PNPM_VERSION" --no-fund --no-audit >&2
fi

# --frozen-lockfile: CI and fresh machines get exactly what was tested.
pnpm install --frozen-lockfile --reporter=append-only >&2
