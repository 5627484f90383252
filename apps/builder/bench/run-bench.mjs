// Benchmark of `splitzip build`: build throughput (GB/s of raw BF16) on the default model and on a
// >= 1 GB generated model, next to baselines measured in the same run:
//   floor  reading the same shard files and SHA-1-hashing them on one thread (a build must at
//          least read every byte and compute the SHA-1 content key), the issue's baseline;
//   disk   writing the same number of payload bytes as the build, one file per tensor, each
//          fsynced (the store's durable writes), converted to raw BF16 GB/s: what the disk allows.
// Builds run the real binary; the cache goes to the disk (os.tmpdir()) or to tmpfs (/dev/shm),
// where fsync is free and the pipeline's CPU work is what remains. Prints a table; asserts nothing.
//
// Usage: pnpm --filter @splitzip/builder bench
// Env:   SPLITZIP_BENCH_SYNTH_BYTES  size asked of the synthetic generator (default 1.1 GiB, which
//                                    gives ~1.16 GB of tensors; the generator rounds to whole layers)
//        SPLITZIP_BENCH_REPEATS      runs per measurement, median reported (default 3)
//        SPLITZIP_BENCH_BASELINE_CLI another build of the CLI (e.g. an earlier commit's dist/cli.js):
//                                    each round also runs its -j2 builds (disk, tmpfs) next to
//                                    this one's, for before/after ratios under the same load
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, open, rm } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeBenchSummary } from '@splitzip/bench-utils';
import { ensureDefaultModel, generateSyntheticModel } from '@splitzip/default-model';
import { openSafetensorsModel } from '@splitzip/safetensors';

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const CLI = here('../dist/cli.js');
const REPO = here('../../../');
if (!existsSync(CLI)) throw new Error(`${CLI} missing: build first (pnpm --filter @splitzip/builder build)`);
const REPEATS = Number(process.env.SPLITZIP_BENCH_REPEATS ?? 3);
const BASELINE_CLI = process.env.SPLITZIP_BENCH_BASELINE_CLI || null;
const SYNTH_BYTES = Number(process.env.SPLITZIP_BENCH_SYNTH_BYTES ?? Math.round(1.1 * 2 ** 30));
const HAS_TIME = existsSync('/usr/bin/time');
const SHM = existsSync('/dev/shm') ? '/dev/shm' : null;
const median = (xs) => (xs.length === 0 ? Number.NaN : [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]);
const range = (xs) => (xs.length === 0 ? [Number.NaN, Number.NaN] : [Math.min(...xs), Math.max(...xs)]);

/** The floor: read every shard file front to back (16 MiB reads) and SHA-1 it, one thread. */
async function readAndHash(paths) {
  const buffer = Buffer.allocUnsafeSlow(16 << 20);
  let bytes = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (const path of paths) {
    const handle = await open(path, 'r');
    const hash = createHash('sha1');
    try {
      for (;;) {
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
        if (bytesRead === 0) break;
        hash.update(buffer.subarray(0, bytesRead));
        bytes += bytesRead;
      }
    } finally {
      await handle.close();
    }
    hash.digest();
  }
  const cpu = process.cpuUsage(cpu0);
  return { bytes, seconds: (performance.now() - t0) / 1000, cpuSeconds: (cpu.user + cpu.system) / 1e6 };
}

/**
 * The disk: write `sizes` (one file each) with fsync per file, as durable blob writes do,
 * `concurrency` files at a time (1: one after the other; the store writes up to 4 blobs of a call
 * at once, and the builder's concurrent commits overlap too).
 */
async function writeDurably(dir, sizes, concurrency = 1) {
  await mkdir(dir, { recursive: true });
  const block = Buffer.alloc(16 << 20, 0x5a);
  const t0 = performance.now();
  let next = 0;
  const writeOne = async (i) => {
    const size = sizes[i];
    const handle = await open(join(dir, `blob-${i}.bin`), 'w');
    try {
      for (let done = 0; done < size; done += block.length) await handle.write(block, 0, Math.min(block.length, size - done));
      await handle.sync();
    } finally {
      await handle.close();
    }
  };
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < sizes.length) await writeOne(next++);
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  await rm(dir, { recursive: true, force: true });
  return seconds;
}

/** Runs the real binary; peak RSS from /usr/bin/time (the whole process, worker threads included). */
function runBuild(model, cacheDir, jobs, cli = CLI) {
  const args = [cli, 'build', model, '--out', cacheDir, '--jobs', String(jobs), '--json', '--quiet'];
  const [command, argv] = HAS_TIME ? ['/usr/bin/time', ['-f', 'maxrss_kb=%M cpu_s=%U+%S', process.execPath, ...args]] : [process.execPath, args];
  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`build failed (${code}): ${stderr}`));
      const report = JSON.parse(stdout);
      const rss = /maxrss_kb=(\d+)/.exec(stderr);
      const cpu = /cpu_s=([\d.]+)\+([\d.]+)/.exec(stderr);
      resolve({ report, maxRssBytes: rss ? Number(rss[1]) * 1024 : null, cpuSeconds: cpu ? Number(cpu[1]) + Number(cpu[2]) : null });
    });
  });
}

async function benchModel(label, modelPath) {
  const model = await openSafetensorsModel(modelPath);
  const shardPaths = model.shards.map((s) => s.path);
  const bf16Bytes = model.tensors.filter((t) => t.dtype === 'BF16').reduce((n, t) => n + t.slice.sizeBytes, 0);
  const largestBytes = model.tensors.reduce((n, t) => Math.max(n, t.slice.sizeBytes), 0);
  await model.close();
  const diskDir = await mkdtemp(join(tmpdir(), 'splitzip-bench-'));
  const shmDir = SHM ? await mkdtemp(join(SHM, 'splitzip-bench-')) : null;
  const runs = { floor: [], disk: [], 'disk 4': [], 'j2 disk': [], 'j2 tmpfs': [], 'j1 disk': [], rerun: [], 'baseline j2 disk': [], 'baseline j2 tmpfs': [] };
  const cpuPerGb = { floor: [], 'j2 tmpfs': [], 'baseline j2 tmpfs': [] };
  const rss = { 'j2 disk': [], 'j1 disk': [] };
  let report;
  try {
    await readAndHash(shardPaths); // warm the page cache: every measurement reads cached files
    for (let r = 0; r < REPEATS; r++) {
      const f = await readAndHash(shardPaths);
      runs.floor.push(f.bytes / f.seconds);
      cpuPerGb.floor.push(f.cpuSeconds / (f.bytes / 1e9));
      for (const [name, root, jobs, cli] of [
        ['j2 disk', diskDir, 2, CLI],
        ['j1 disk', diskDir, 1, CLI],
        ['j2 tmpfs', shmDir, 2, CLI],
        ...(BASELINE_CLI ? [['baseline j2 disk', diskDir, 2, BASELINE_CLI], ['baseline j2 tmpfs', shmDir, 2, BASELINE_CLI]] : []),
      ]) {
        if (!root) continue;
        const cacheDir = join(root, `cache-${r}`);
        const result = await runBuild(modelPath, cacheDir, jobs, cli);
        report = result.report;
        runs[name].push(bf16Bytes / report.elapsed_s);
        if (rss[name] && result.maxRssBytes) rss[name].push(result.maxRssBytes);
        if (cpuPerGb[name] && result.cpuSeconds !== null) cpuPerGb[name].push(result.cpuSeconds / (bf16Bytes / 1e9));
        if (name === 'j2 disk') {
          const again = await runBuild(modelPath, cacheDir, 2);
          if (again.report.encoded !== 0) throw new Error('the re-run encoded something');
          runs.rerun.push(bf16Bytes / again.report.elapsed_s);
        }
        await rm(cacheDir, { recursive: true, force: true });
      }
      const payloadSizes = report.tensors.filter((t) => t.status === 'encoded').map((t) => t.compBytes);
      runs.disk.push(report.raw_bytes / (await writeDurably(join(diskDir, 'disk'), payloadSizes)));
      runs['disk 4'].push(report.raw_bytes / (await writeDurably(join(diskDir, 'disk'), payloadSizes, 4)));
    }
  } finally {
    await rm(diskDir, { recursive: true, force: true });
    if (shmDir) await rm(shmDir, { recursive: true, force: true });
  }
  const floor = median(runs.floor);
  const gb = (x) => (Number.isFinite(x) ? (x / 1e9).toFixed(3) : 'n/a');
  const vs = (x) => (Number.isFinite(x) ? `${(x / floor).toFixed(2)}x` : 'n/a');
  // median (ratio to the floor's median) and the range of the runs' ratios, each to its own round's floor
  const cell = (name) => {
    const ratios = runs[name].map((x, r) => x / runs.floor[r]);
    const [lo, hi] = range(ratios);
    return `${gb(median(runs[name]))} (${vs(median(runs[name]))}; ${lo.toFixed(2)}-${hi.toFixed(2)})`;
  };
  const mb = (xs) => (xs.length ? (Math.max(...xs) / 1e6).toFixed(0) : 'n/a');
  const row = {
    model: label,
    'BF16 GB': gb(bf16Bytes),
    'floor read+SHA-1': `${gb(floor)} (${range(runs.floor).map(gb).join('-')})`,
    'disk write bound 1|4 at once': `${cell('disk')} | ${cell('disk 4')}`,
    'build -j2 disk': cell('j2 disk'),
    'build -j1 disk': cell('j1 disk'),
    'build -j2 tmpfs': cell('j2 tmpfs'),
    'rerun (cached)': cell('rerun'),
    ...(BASELINE_CLI ? { 'baseline -j2 disk': cell('baseline j2 disk'), 'baseline -j2 tmpfs': cell('baseline j2 tmpfs') } : {}),
    'CPU s/GB floor|build': `${median(cpuPerGb.floor).toFixed(2)}|${median(cpuPerGb['j2 tmpfs']).toFixed(2)}${BASELINE_CLI ? `|baseline ${median(cpuPerGb['baseline j2 tmpfs']).toFixed(2)}` : ''}`,
    'peak RSS MB -j2/-j1': `${mb(rss['j2 disk'])}/${mb(rss['j1 disk'])}`,
    'bound MB (3x largest+150)': ((3 * largestBytes + 150e6) / 1e6).toFixed(0),
    ratio: report.ratio?.toFixed(4),
  };
  // Not printed (non-enumerable): the numbers behind the summary file's headline rows.
  Object.defineProperty(row, 'measured', {
    enumerable: false,
    value: {
      floorBps: floor,
      buildJ2Bps: median(runs['j2 disk']),
      peakRssJ2Bytes: rss['j2 disk'].length ? Math.max(...rss['j2 disk']) : null,
      boundBytes: 3 * largestBytes + 150e6,
    },
  });
  return row;
}

const defaultDir = await ensureDefaultModel();
const synthDir = join(REPO, 'models', `synthetic-bench-${SYNTH_BYTES}`);
console.error(`bench: generating/reusing ${synthDir} ...`);
const synth = await generateSyntheticModel(synthDir, { totalBytes: SYNTH_BYTES, seed: 1, reuseIfPresent: true });

/**
 * Where a build's CPU time goes: each stage alone, one thread, over the same tensors in memory
 * (the first ~256 MB of BF16 tensors of the model), in this run.
 */
async function benchStages(modelPath) {
  const { createHash: hash } = await import('node:crypto');
  const codec = await import('@splitzip/codec');
  const store = await import('@splitzip/store');
  const { readTensorBytes } = await import('@splitzip/safetensors');
  const model = await openSafetensorsModel(modelPath);
  const tensors = [];
  let total = 0;
  for (const t of model.tensors) {
    if (t.dtype !== 'BF16' || t.slice.sizeBytes === 0 || total > 256e6) continue;
    tensors.push({ t, bytes: await readTensorBytes(model, t) });
    total += t.slice.sizeBytes;
  }
  await model.close();
  const values = tensors.map(({ bytes }) => new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2));
  const calibrations = values.map((v) => codec.calibrateFromHistogram(codec.countExponents(v)));
  const books = calibrations.map((c) => c.codebook);
  const payloads = values.map((v, i) => codec.encode(v, books[i]));
  // The build encodes into reused buffers, sized from the calibration's escape count.
  const out = new Uint8Array(Math.max(...payloads.map((p) => p.length)) + 4096);
  const time = (fn) => {
    fn();
    const t0 = performance.now();
    fn();
    return (performance.now() - t0) / 1000;
  };
  const stages = {
    'SHA-1 content key (store.computeContentKey, on the worker)': () => tensors.forEach(({ t, bytes }) => store.computeContentKey(bytes, t.shape, 'BF16')),
    'SHA-256 of the raw bytes (the entry digest the build took before)': () => tensors.forEach(({ bytes }) => hash('sha256').update(bytes).digest()),
    'exponent histogram (codec.countExponents)': () => values.forEach((v) => codec.countExponents(v)),
    'encode into a reused buffer (codec.encode out, as the build)': () =>
      values.forEach((v, i) => codec.encode(v, books[i], { out, escapeCount: calibrations[i].escapeCount })),
    'encode allocating its payload (codec.encode, before)': () => values.forEach((v, i) => codec.encode(v, books[i])),
    'SHA-256 of the payload (blob digest, on the worker; s3:// caches only)': () => payloads.forEach((p) => hash('sha256').update(p).digest()),
    'XXH32 check of the payload (the store, codec.verifyPayloadChecksum)': () => payloads.forEach((p) => codec.verifyPayloadChecksum(p)),
  };
  const rows = [];
  let sum = 0;
  for (const [stage, fn] of Object.entries(stages)) {
    const seconds = time(fn);
    // The "before" rows are paths the build no longer takes, the blob digest one a local cache
    // does not take (the benchmark's caches are local): not part of the sum.
    if (!stage.endsWith('before)') && !stage.endsWith('only)')) sum += seconds;
    rows.push({ stage, 's per GB of BF16': (seconds / (total / 1e9)).toFixed(3), 'GB/s': (total / seconds / 1e9).toFixed(2) });
  }
  rows.push({ stage: 'sum (one thread, a local cache)', 's per GB of BF16': (sum / (total / 1e9)).toFixed(3), 'GB/s': (total / sum / 1e9).toFixed(2) });
  return rows;
}

const rows = [];
rows.push(await benchModel('default (USE-lite)', join(defaultDir, 'model.safetensors.index.json')));
rows.push(await benchModel(`synthetic ${(SYNTH_BYTES / 2 ** 30).toFixed(2)} GiB`, synth.indexPath));

console.log(`splitzip build benchmark: node ${process.version}, ${cpus().length} cores, ${REPEATS} runs each (median), shard files in the page cache.`);
console.log('GB/s of raw BF16, median; (x; lo-hi) = ratio of the median to the floor\'s median (read + SHA-1 of the same files, one thread, same run), and the range of each run\'s ratio to its own round\'s floor.');
console.log('disk write bound = the build\'s payload bytes written with one fsync per blob, one blob at a time | 4 at once (the store\'s blob write concurrency), as raw-BF16 GB/s.');
console.log('Build time = the report\'s elapsed_s (open model and cache, workers, hash, calibrate, encode, durable commits).');
console.table(rows);
const { getCodecBackend } = await import('@splitzip/codec');
console.log(`CPU stages of a build, each alone on one thread, over ~256 MB of the synthetic model's tensors (codec kernels: ${getCodecBackend()}):`);
const stageRows = await benchStages(synth.indexPath);
console.table(stageRows);
{
  // What the stages alone allow: their sum spread perfectly over the cores, against this run's floor.
  const sumSPerGb = Number(stageRows.at(-1)['s per GB of BF16']);
  const synthFloor = rows.at(-1).measured.floorBps;
  const cores = cpus().length;
  const boundBps = 1e9 / (sumSPerGb / cores);
  console.log(`Stage bound: ${sumSPerGb.toFixed(2)} CPU-s/GB over ${cores} cores = ${(boundBps / 1e9).toFixed(3)} GB/s at best, ${(boundBps / synthFloor).toFixed(2)}x the synthetic model's floor (${(synthFloor / 1e9).toFixed(3)} GB/s), before any start-up, I/O or messaging.`);
}

// Headline rows for `pnpm bench`'s summary table: every value from this run.
const summaryRows = [];
for (const row of rows) {
  const m = row.measured;
  const ratio = m.buildJ2Bps / m.floorBps;
  summaryRows.push({
    metric: `build --jobs 2 vs floor: ${row.model}`,
    value: Number.isFinite(ratio) ? ratio : null,
    unit: 'x',
    baseline: `read + SHA-1 ${(m.floorBps / 1e9).toFixed(3)} GB/s`,
    target: '>= 0.6x',
    met: Number.isFinite(ratio) ? ratio >= 0.6 : null,
    note: `${(m.buildJ2Bps / 1e9).toFixed(3)} GB/s of BF16, cache on disk`,
  });
  summaryRows.push({
    metric: `peak RSS --jobs 2: ${row.model}`,
    value: m.peakRssJ2Bytes === null ? null : m.peakRssJ2Bytes / 1e6,
    unit: 'MB',
    baseline: `bound 3 x largest tensor + 150 MB = ${(m.boundBytes / 1e6).toFixed(0)} MB`,
    target: `<= ${(m.boundBytes / 1e6).toFixed(0)} MB`,
    met: m.peakRssJ2Bytes === null ? null : m.peakRssJ2Bytes <= m.boundBytes,
    ...(m.peakRssJ2Bytes === null ? { note: '/usr/bin/time missing: not measured' } : {}),
  });
}
writeBenchSummary({
  packageName: '@splitzip/builder',
  title: `splitzip build throughput vs read+SHA-1 floor, peak RSS (${REPEATS} runs, median)`,
  rows: summaryRows,
});
