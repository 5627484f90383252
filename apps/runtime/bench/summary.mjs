#!/usr/bin/env node
// Moved to scripts/bench-summary.mjs (the second half of the root `pnpm bench`); kept so that
// `node apps/runtime/bench/summary.mjs` still prints the table.
import '../../../scripts/bench-summary.mjs';
