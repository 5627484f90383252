// Peak RSS of `splitzip build` on a generated model of at least 2 GB, against the promised bound
// of 3 x the largest tensor + 150 MB. Runs the real binary under `/usr/bin/time -v` (the process's
// maximum resident set size, worker threads included). Prints one line per run; asserts nothing.
//
// Usage: node bench/measure-rss.mjs [--jobs 2,1] [--bytes 2.1G]
//        (--bytes 470M: the model of small tensors, largest 8.4 MB, where --jobs 8 used to exceed the bound)
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { generateSyntheticModel } from '@splitzip/default-model';
import { openSafetensorsModel } from '@splitzip/safetensors';

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const CLI = here('../dist/cli.js');
if (!existsSync(CLI)) throw new Error(`${CLI} missing: build first`);
if (!existsSync('/usr/bin/time')) throw new Error('/usr/bin/time is needed (apt-get install time)');
const { values } = parseArgs({ options: { jobs: { type: 'string', default: '2,1' }, bytes: { type: 'string', default: '2.1G' } } });
const totalBytes = Math.round(Number.parseFloat(values.bytes) * (values.bytes.endsWith('G') ? 2 ** 30 : values.bytes.endsWith('M') ? 2 ** 20 : 1));

const dir = join(here('../../../'), 'models', `synthetic-rss-${totalBytes}`);
console.error(`measure-rss: generating/reusing ${dir} ...`);
const { indexPath } = await generateSyntheticModel(dir, { totalBytes, seed: 2, reuseIfPresent: true });
const model = await openSafetensorsModel(indexPath);
const modelBytes = model.tensors.reduce((n, t) => n + t.slice.sizeBytes, 0);
const largest = model.tensors.reduce((n, t) => Math.max(n, t.slice.sizeBytes), 0);
const tensorCount = model.tensors.length;
await model.close();
const boundBytes = 3 * largest + 150e6;

console.log(`model: ${(modelBytes / 1e9).toFixed(2)} GB in ${tensorCount} tensors, largest ${(largest / 1e6).toFixed(1)} MB; bound 3 x largest + 150 MB = ${(boundBytes / 1e6).toFixed(0)} MB`);
console.log(`node ${process.version}, ${execFileSync('nproc').toString().trim()} cores`);
for (const jobs of values.jobs.split(',')) {
  const scratch = await mkdtemp(join(tmpdir(), 'splitzip-rss-'));
  try {
    const run = spawnSync('/usr/bin/time', ['-v', process.execPath, CLI, 'build', indexPath, '--out', join(scratch, 'cache'), '--jobs', jobs, '--json', '--quiet'], {
      encoding: 'utf8',
      maxBuffer: 64 << 20,
    });
    if (run.status !== 0) throw new Error(`build failed: ${run.stderr}`);
    const report = JSON.parse(run.stdout);
    const rssKb = Number(/Maximum resident set size \(kbytes\): (\d+)/.exec(run.stderr)?.[1]);
    const wall = /Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)/.exec(run.stderr)?.[1];
    const rss = rssKb * 1024;
    console.log(
      `--jobs ${jobs} (${report.workers ?? '?'} workers): peak RSS ${(rss / 1e6).toFixed(0)} MB = ${(rss / largest).toFixed(2)} x largest tensor; ` +
        `${rss < boundBytes ? 'UNDER' : 'OVER'} the bound by ${(Math.abs(boundBytes - rss) / 1e6).toFixed(0)} MB; ` +
        `${report.encoded} encoded, ${(report.stored_bytes / 1e9).toFixed(2)} GB written, wall ${wall}`,
    );
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
