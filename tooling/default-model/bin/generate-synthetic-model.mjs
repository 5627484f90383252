#!/usr/bin/env node
// Writes a deterministic synthetic sharded BF16 model; prints its directory on stdout.
// Usage: node tooling/default-model/bin/generate-synthetic-model.mjs --out DIR [--total-bytes 1G] [--seed 1] [--shard-bytes 256M] [--reuse]
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL('../dist/index.js', import.meta.url));
if (!existsSync(dist)) {
  console.error('generate-synthetic-model: @splitzip/default-model is not built; run `pnpm exec turbo run build --filter=@splitzip/default-model`');
  process.exit(1);
}
const { generateSyntheticModel } = await import(dist);

const usage = 'usage: generate-synthetic-model.mjs --out DIR [--total-bytes 1G] [--seed 1] [--shard-bytes 256M] [--reuse]';
/** "1G", "256M", "64K" or plain bytes. */
function parseBytes(text) {
  const match = /^(\d+(?:\.\d+)?)([KMG]?)i?B?$/i.exec(text ?? '');
  if (!match) throw new Error(`bad size ${text}`);
  const unit = { '': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3 }[match[2].toUpperCase()];
  return Math.round(Number(match[1]) * unit);
}
const args = process.argv.slice(2);
let out;
const options = { totalBytes: 1024 ** 3 };
try {
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--out') out = args[++i];
    else if (a === '--total-bytes') options.totalBytes = parseBytes(args[++i]);
    else if (a === '--shard-bytes') options.shardBytes = parseBytes(args[++i]);
    else if (a === '--seed') options.seed = Number(args[++i]);
    else if (a === '--reuse') options.reuseIfPresent = true;
    else throw new Error(`unknown argument ${a}`);
  }
  if (!out) throw new Error('--out is required');
} catch (error) {
  console.error(`generate-synthetic-model: ${error.message}\n${usage}`);
  process.exit(2);
}
try {
  const started = performance.now();
  let last = 0;
  const result = await generateSyntheticModel(out, {
    ...options,
    onProgress: ({ writtenBytes, totalBytes }) => {
      if (writtenBytes - last >= 256 * 1024 ** 2 || writtenBytes === totalBytes) {
        last = writtenBytes;
        console.error(`generate-synthetic-model: ${(writtenBytes / 1024 ** 2).toFixed(0)} / ${(totalBytes / 1024 ** 2).toFixed(0)} MiB`);
      }
    },
  });
  const seconds = (performance.now() - started) / 1000;
  console.error(`generate-synthetic-model: ${result.reused ? 'reused' : 'wrote'} ${result.tensors.length} tensors, ${(result.totalBytes / 1024 ** 2).toFixed(1)} MiB in ${result.shardPaths.length} shards, ${seconds.toFixed(2)} s`);
  console.log(result.dir);
} catch (error) {
  console.error(`generate-synthetic-model: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
