// Benchmark of @splitzip/safetensors: header parsing (10,000 tensors) and reading every tensor of a
// model, each next to a baseline measured in the same run (plain JSON.parse; a plain fs read of the
// same bytes). Prints a table; asserts nothing. Usage: pnpm --filter @splitzip/safetensors bench
// Env: SPLITZIP_BENCH_SYNTH_BYTES (default 512 MiB) sizes the generated model.
// Headline rows (the iterateTensors target, header parsing) go to <repo>/.cache/bench for `pnpm bench`'s summary.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { writeBenchSummary } from '@splitzip/bench-utils';

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const st = await import(here('../dist/index.js'));
// The default-model tooling depends on this package, so it is reached by path, not as a dependency.
const toolingDist = here('../../../tooling/default-model/dist/index.js');
if (!existsSync(toolingDist)) execFileSync('pnpm', ['--filter', '@splitzip/default-model', 'build'], { stdio: 'inherit' });
const tooling = await import(toolingDist);

const REPEATS = 7;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rows = [];
const measured = []; // the same rows as numbers, for the summary file
const row = (what, method, bytes, seconds, baselineSeconds, extra = '') => {
  measured.push({ what, method, bytes, seconds, baselineSeconds });
  rows.push({ what, method, MB: (bytes / 1e6).toFixed(1), 'ms (median)': (seconds * 1e3).toFixed(2), 'GB/s': (bytes / seconds / 1e9).toFixed(2), 'vs baseline': (baselineSeconds / seconds).toFixed(2) + 'x', extra });
};

// 1. Header parsing of a 10,000-tensor file.
{
  const specs = [];
  for (let i = 0; i < 10_000; i++) specs.push({ name: `model.layers.${i >> 4}.block.${i & 15}.weight`, dtype: i % 7 === 0 ? 'F32' : 'BF16', shape: [64 + (i % 5), 32] });
  const header = st.serializeSafetensorsHeader(specs, { format: 'pt' });
  const headerBytes = header.bytes.subarray(8);
  const context = { fileName: 'bench', fileBytes: header.bytes.length + header.dataBytes };
  const text = new TextDecoder().decode(headerBytes);
  const timeIt = (fn) => {
    const times = [];
    for (let r = 0; r < REPEATS * 3; r++) {
      const t0 = performance.now();
      fn();
      times.push((performance.now() - t0) / 1e3);
    }
    return median(times);
  };
  timeIt(() => st.parseSafetensorsHeader(headerBytes, context)); // warm-up (JIT)
  const base = timeIt(() => JSON.parse(new TextDecoder().decode(headerBytes)));
  const ours = timeIt(() => st.parseSafetensorsHeader(headerBytes, context));
  const dup = timeIt(() => st.findDuplicateJsonKey(text));
  row('header, 10,000 tensors', 'baseline: TextDecoder + JSON.parse', headerBytes.length, base, base, `${(10_000 / base / 1e6).toFixed(2)} M tensors/s`);
  row('header, 10,000 tensors', 'parseSafetensorsHeader (all rules)', headerBytes.length, ours, base, `${(10_000 / ours / 1e6).toFixed(2)} M tensors/s`);
  row('header, 10,000 tensors', '  of which duplicate-key scan', headerBytes.length, dup, base, '');
}

// 2. Reading every tensor of a model.
async function plainRead(model, buffer) {
  let total = 0;
  for (const shard of model.shards) {
    const handle = await open(shard.path, 'r');
    try {
      let position = 8 + shard.headerBytes;
      while (position < shard.fileBytes) {
        const { bytesRead } = await handle.read(buffer, 0, Math.min(buffer.length, shard.fileBytes - position), position);
        if (bytesRead === 0) break;
        position += bytesRead;
        total += bytesRead;
      }
    } finally {
      await handle.close();
    }
  }
  return total;
}

async function benchModel(label, dir) {
  const model = await st.openSafetensorsModel(dir);
  const dataBytes = model.tensors.reduce((n, t) => n + t.slice.sizeBytes, 0);
  const largest = model.tensors.reduce((n, t) => Math.max(n, t.slice.sizeBytes), 0);
  const plainBuffer = Buffer.allocUnsafeSlow(16 << 20);
  const target = new Uint8Array(largest);
  const methods = {
    'baseline: plain fs read, 16 MiB chunks': () => plainRead(model, plainBuffer),
    'iterateTensors (reuseBuffers)': async () => {
      let n = 0;
      for await (const { bytes } of st.iterateTensors(model, { reuseBuffers: true })) n += bytes.length;
      return n;
    },
    'iterateTensors (fresh buffers)': async () => {
      let n = 0;
      for await (const { bytes } of st.iterateTensors(model)) n += bytes.length;
      return n;
    },
    'readTensorBytes each, one target': async () => {
      let n = 0;
      for (const tensor of model.tensors) n += (await st.readTensorBytes(model, tensor, target)).length;
      return n;
    },
  };
  const times = Object.fromEntries(Object.keys(methods).map((k) => [k, []]));
  for (const fn of Object.values(methods)) if ((await fn()) !== dataBytes) throw new Error('byte count mismatch'); // warm cache + JIT
  for (let r = 0; r < REPEATS; r++) {
    // Interleaved so that machine noise hits every method alike.
    for (const [name, fn] of Object.entries(methods)) {
      const t0 = performance.now();
      await fn();
      times[name].push((performance.now() - t0) / 1e3);
    }
  }
  const base = median(times['baseline: plain fs read, 16 MiB chunks']);
  for (const name of Object.keys(methods)) row(`${label} (${model.tensors.length} tensors, ${model.shards.length} shards)`, name, dataBytes, median(times[name]), base);
  await model.close();
}

const started = performance.now();
const defaultDir = await tooling.ensureDefaultModel();
await benchModel('default model', defaultDir);
const synthBytes = Number(process.env.SPLITZIP_BENCH_SYNTH_BYTES ?? 512 * 1024 ** 2);
const synthDir = here(`../../../models/bench-synthetic-${Math.round(synthBytes / 1024 ** 2)}m`);
const synth = await tooling.generateSyntheticModel(synthDir, { totalBytes: synthBytes, seed: 1, reuseIfPresent: true });
await benchModel(`synthetic ${(synth.totalBytes / 1e6).toFixed(0)} MB`, synth.dir);

console.log(`@splitzip/safetensors bench (node ${process.version}, ${REPEATS} interleaved repeats, median; page cache warm)`);
console.table(rows);
console.log(`target: iterateTensors (reuseBuffers, the streaming mode) >= 0.90x the plain fs read. total ${((performance.now() - started) / 1e3).toFixed(1)} s`);

// Headline rows for the root summary, from this run's medians.
const GBps = (m) => m.bytes / m.seconds / 1e9;
const find = (what, method) => measured.find((m) => m.what.startsWith(what) && m.method === method);
const ITERATE_TARGET = 0.9;
const summaryRows = [];
{
  const parse = find('header, 10,000 tensors', 'parseSafetensorsHeader (all rules)');
  const base = find('header, 10,000 tensors', 'baseline: TextDecoder + JSON.parse');
  summaryRows.push({
    metric: 'parseSafetensorsHeader, 10,000 tensors, vs JSON.parse',
    value: base.seconds / parse.seconds,
    unit: 'x',
    baseline: `TextDecoder + JSON.parse ${(1e4 / base.seconds / 1e6).toFixed(2)} M tensors/s`,
    note: `${(1e4 / parse.seconds / 1e6).toFixed(2)} M tensors/s, all rules`,
  });
}
for (const m of measured.filter((x) => !x.what.startsWith('header'))) {
  if (m.method.startsWith('baseline')) continue;
  const ratio = m.baselineSeconds / m.seconds;
  // The target is for streaming a model the way the builder and runtime do (reused buffers, like the
  // plain read it is compared with); fresh buffers per tensor are shown for information only.
  const isIterate = m.method.startsWith('iterateTensors (reuseBuffers)');
  summaryRows.push({
    metric: `${m.method}, ${m.what}`,
    value: ratio,
    unit: 'x',
    baseline: `plain fs read ${(m.bytes / m.baselineSeconds / 1e9).toFixed(2)} GB/s`,
    target: isIterate ? `>= ${ITERATE_TARGET.toFixed(2)}x` : null,
    met: isIterate ? ratio >= ITERATE_TARGET : null,
    note: `${GBps(m).toFixed(2)} GB/s, page cache warm`,
  });
}
writeBenchSummary({
  packageName: '@splitzip/safetensors',
  title: 'header parsing and reading every tensor vs plain fs reads',
  environment: { repeats: REPEATS, synthBytes },
  rows: summaryRows,
});