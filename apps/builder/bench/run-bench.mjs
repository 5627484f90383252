// Benchmark of `splitzip build`: build throughput (GB/s of raw BF16) on the default model and on a
// >= 1 GB generated model, next to the floor measured in the same run: reading the same files and
// SHA-1-hashing them on one thread (a build must at least read every byte and compute the SHA-1
// content key). Prints a table; asserts nothing.
//
// Usage: pnpm --filter @splitzip/builder bench
// Env:   SPLITZIP_BENCH_SYNTH_BYTES  size asked of the synthetic generator (default 1.1 GiB, which
//                                    gives ~1.06 GB of tensors; the generator rounds to whole layers)
//        SPLITZIP_BENCH_REPEATS      runs per measurement, median reported (default 3)
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureDefaultModel, generateSyntheticModel } from '@splitzip/default-model';
import { openSafetensorsModel } from '@splitzip/safetensors';

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const CLI = here('../dist/cli.js');
const REPO = here('../../../');
if (!existsSync(CLI)) throw new Error(`${CLI} missing: build first (pnpm --filter @splitzip/builder build)`);
const REPEATS = Number(process.env.SPLITZIP_BENCH_REPEATS ?? 3);
const SYNTH_BYTES = Number(process.env.SPLITZIP_BENCH_SYNTH_BYTES ?? Math.round(1.1 * 2 ** 30));
const HAS_TIME = existsSync('/usr/bin/time');
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** The floor: read every shard file front to back (16 MiB reads) and SHA-1 it, one thread. */
async function readAndHash(paths) {
  const buffer = Buffer.allocUnsafeSlow(16 << 20);
  let bytes = 0;
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
  return { bytes, seconds: (performance.now() - t0) / 1000 };
}

/** Runs the real binary; peak RSS from /usr/bin/time (the whole process, worker threads included). */
function runBuild(model, cacheDir, jobs) {
  const args = [CLI, 'build', model, '--out', cacheDir, '--jobs', String(jobs), '--json', '--quiet'];
  const [command, argv] = HAS_TIME ? ['/usr/bin/time', ['-f', 'maxrss_kb=%M', process.execPath, ...args]] : [process.execPath, args];
  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    const t0 = performance.now();
    child.on('close', (code) => {
      const wallS = (performance.now() - t0) / 1000;
      if (code !== 0) return reject(new Error(`build failed (${code}): ${stderr}`));
      const report = JSON.parse(stdout);
      const rss = /maxrss_kb=(\d+)/.exec(stderr);
      resolve({ report, wallS, maxRssBytes: rss ? Number(rss[1]) * 1024 : null });
    });
  });
}

async function benchModel(label, modelPath) {
  const model = await openSafetensorsModel(modelPath);
  const shardPaths = model.shards.map((s) => s.path);
  const bf16Bytes = model.tensors.filter((t) => t.dtype === 'BF16').reduce((n, t) => n + t.slice.sizeBytes, 0);
  const largestBytes = model.tensors.reduce((n, t) => Math.max(n, t.slice.sizeBytes), 0);
  await model.close();
  const scratch = await mkdtemp(join(tmpdir(), 'splitzip-bench-'));
  try {
    await readAndHash(shardPaths); // warm the page cache: every measurement reads cached files
    const floor = [];
    const builds = { 2: [], 1: [] };
    const rss = { 2: [], 1: [] };
    const rerun = [];
    let lastReport;
    for (let r = 0; r < REPEATS; r++) {
      const f = await readAndHash(shardPaths);
      floor.push(f.bytes / f.seconds);
      for (const jobs of [2, 1]) {
        const cacheDir = join(scratch, `cache-${jobs}-${r}`);
        const { report, maxRssBytes } = await runBuild(modelPath, cacheDir, jobs);
        builds[jobs].push(bf16Bytes / report.elapsed_s);
        if (maxRssBytes) rss[jobs].push(maxRssBytes);
        lastReport = report;
        if (jobs === 2) {
          const again = await runBuild(modelPath, cacheDir, jobs);
          if (again.report.encoded !== 0) throw new Error('rerun encoded something');
          rerun.push(bf16Bytes / again.report.elapsed_s);
        }
        await rm(cacheDir, { recursive: true, force: true });
      }
    }
    const floorRate = median(floor);
    const gb = (x) => (x / 1e9).toFixed(3);
    const mb = (x) => (x === null || x === undefined ? 'n/a' : (x / 1e6).toFixed(0));
    const boundBytes = 3 * largestBytes + 150e6;
    return {
      model: label,
      'BF16 GB': gb(bf16Bytes),
      'floor read+SHA-1 GB/s': gb(floorRate),
      'build -j2 GB/s': gb(median(builds[2])),
      'vs floor': (median(builds[2]) / floorRate).toFixed(2) + 'x',
      'build -j1 GB/s': gb(median(builds[1])),
      'j1 vs floor': (median(builds[1]) / floorRate).toFixed(2) + 'x',
      'rerun (all cached) GB/s': gb(median(rerun)),
      'rerun vs floor': (median(rerun) / floorRate).toFixed(2) + 'x',
      'peak RSS -j2 MB': mb(rss[2].length ? Math.max(...rss[2]) : null),
      'peak RSS -j1 MB': mb(rss[1].length ? Math.max(...rss[1]) : null),
      'largest tensor MB': mb(largestBytes),
      'RSS bound MB (3x largest + 150)': mb(boundBytes),
      ratio: lastReport.ratio?.toFixed(4),
    };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

const defaultDir = await ensureDefaultModel();
const synthDir = join(REPO, 'models', `synthetic-bench-${SYNTH_BYTES}`);
console.error(`bench: generating/reusing ${synthDir} ...`);
const synth = await generateSyntheticModel(synthDir, { totalBytes: SYNTH_BYTES, seed: 1, reuseIfPresent: true });

const rows = [];
rows.push(await benchModel('default (USE-lite, 3 shards)', join(defaultDir, 'model.safetensors.index.json')));
rows.push(await benchModel(`synthetic ${(SYNTH_BYTES / 2 ** 30).toFixed(2)} GiB asked`, synth.indexPath));

const cpu = execFileSync('nproc').toString().trim();
console.log(`splitzip build benchmark: node ${process.version}, ${cpu} cores, ${REPEATS} runs each (median), files in the page cache,`);
console.log('build GB/s = raw BF16 bytes / build time (open model + cache, hash, calibrate, encode, durable writes);');
console.log('floor = reading the same shard files and SHA-1-hashing them on one thread, in the same run.');
console.table(rows);
