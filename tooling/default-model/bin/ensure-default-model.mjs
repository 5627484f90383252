#!/usr/bin/env node
// Generates the built-in default model if missing or out of date; prints its directory on stdout.
// Usage: node tooling/default-model/bin/ensure-default-model.mjs [--out DIR] [--force]
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL('../dist/index.js', import.meta.url));
if (!existsSync(dist)) {
  console.error('ensure-default-model: @splitzip/default-model is not built; run `pnpm exec turbo run build --filter=@splitzip/default-model`');
  process.exit(1);
}
const { ensureDefaultModel } = await import(dist);

const args = process.argv.slice(2);
const options = {};
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--out' && args[i + 1]) options.outDir = args[++i];
  else if (args[i] === '--force') options.force = true;
  else {
    console.error(`ensure-default-model: unknown argument ${args[i]}\nusage: ensure-default-model.mjs [--out DIR] [--force]`);
    process.exit(2);
  }
}
try {
  const started = performance.now();
  const dir = await ensureDefaultModel(options);
  console.error(`ensure-default-model: ready in ${((performance.now() - started) / 1000).toFixed(2)} s`);
  console.log(dir);
} catch (error) {
  console.error(`ensure-default-model: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
