// s3:// caches end to end through the real binary against the Ceph gateway: build the default model
// into a bucket the build creates, verify it against the files, inspect, a re-run that writes
// nothing, gc; an unreachable endpoint gives one line and exit 1.
import { createServer } from 'node:net';
import { DeleteObjectCommand } from '@aws-sdk/client-s3';
import { join } from 'node:path';
import { ensureDefaultModel } from '@splitzip/default-model';
import { openSafetensorsModel } from '@splitzip/safetensors';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTempDir, type TempDir } from './helpers/models.js';
import type { BuildJson, InspectJson, VerifyJson } from './helpers/reports.js';
import { assertBuilt, runCli, runJson } from './helpers/run-cli.js';
import { describeS3, dropBucket, gatewayProblem, listObjects, rawClient, uniqueBucket } from './helpers/s3.js';

let temp: TempDir;
let indexPath: string;
const client = gatewayProblem ? undefined : rawClient();
const bucket = uniqueBucket('default');

beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir();
  const dir = await ensureDefaultModel({ outDir: join(temp.path, 'default-model') });
  indexPath = join(dir, 'model.safetensors.index.json');
});
afterAll(async () => {
  if (client) {
    await dropBucket(client, bucket);
    client.destroy();
  }
  await temp?.cleanup();
});

describeS3('splitzip with an s3:// cache (default model)', () => {
  it('builds into a new bucket, verifies against the model, inspects, and a re-run writes nothing', async () => {
    const url = `s3://${bucket}/caches/default`;
    const model = await openSafetensorsModel(indexPath);
    const tensorCount = model.tensors.length;
    const bf16Count = model.tensors.filter((t) => t.dtype === 'BF16').length;
    await model.close();

    const { json: build } = await runJson<BuildJson>(['build', indexPath, '--out', url, '--jobs', '2', '--inline-max-mib', '0']);
    expect(build.cache).toBe(url);
    expect(build.tensors).toHaveLength(tensorCount);
    expect(build.encoded + build.cached + build.skipped_coverage).toBe(bf16Count);
    expect(build.skipped_dtype).toBe(tensorCount - bf16Count);
    expect(build.encoded).toBeGreaterThan(bf16Count / 2);
    expect(build.aliased).toBe(build.encoded + build.cached);
    expect(build.ratio!).toBeGreaterThan(0.7);
    expect(build.ratio!).toBeLessThan(0.8);
    const served = build.tensors.filter((t) => t.status === 'encoded' || t.status === 'cached');
    expect(build.comp_bytes).toBe(served.reduce((s, t) => s + t.compBytes!, 0));
    expect(build.stored_bytes).toBe(build.tensors.filter((t) => t.status === 'encoded').reduce((s, t) => s + t.compBytes!, 0));

    // The objects are the store's S3 layout below the prefix, one blob and one entry per encoded tensor.
    const objects = await listObjects(client!, bucket);
    expect(objects.every((o) => o.key.startsWith('caches/default/'))).toBe(true);
    expect(objects.filter((o) => o.key.startsWith('caches/default/blobs/'))).toHaveLength(build.encoded);
    expect(objects.filter((o) => o.key.startsWith('caches/default/entries/'))).toHaveLength(build.encoded);
    expect(objects.filter((o) => o.key.startsWith('caches/default/blobs/')).reduce((s, o) => s + o.sizeBytes, 0)).toBe(build.stored_bytes);

    const { json: verify } = await runJson<VerifyJson>(['verify', url, '--model', indexPath]);
    expect(verify.ok).toBe(true);
    expect(verify.store.checked).toBe(build.encoded);
    expect(verify.store.decoded).toBe(build.encoded);
    expect(verify.model!.totals).toMatchObject({ tensors: tensorCount, ok: build.encoded + build.cached, failed: 0 });
    expect(verify.model!.totals.not_cached).toBe(build.skipped_coverage + build.skipped_dtype);
    // A build into a bucket records no file stamps (bindings there are every host's): the tensors
    // are ok but unrecorded, and the remedy named is a load on this host, not a build (which records none).
    const unrecorded = verify.model!.tensors.filter((t) => t.unrecorded === true);
    expect(unrecorded.length).toBe(build.encoded + build.cached);
    for (const t of unrecorded) expect(t.reason).toMatch(/^its bytes are the entry's; an s3:\/\/ cache keeps no local file stamps in the bucket \(by design: .*a load with a readThroughDir records this file's stamp on that host$/);

    const { json: inspect } = await runJson<InspectJson>(['inspect', url]);
    expect(inspect.cache).toBe(url);
    expect(inspect.totals.entries).toBe(build.encoded);
    expect(inspect.totals.slices).toBe(build.encoded + build.cached);
    expect(inspect.totals.compBytes).toBe(build.stored_bytes);
    const slices = new Set(inspect.entries.flatMap((e) => e.slices.map((s) => s.join('|'))));
    for (const t of served) expect(slices.has([t.shard, t.offsetBytes, t.sizeBytes].join('|'))).toBe(true);

    // Re-run: everything found, nothing written (same objects, same ETags and times).
    const { json: again } = await runJson<BuildJson>(['build', indexPath, '--out', url, '--jobs', '1', '--inline-max-mib', '0']);
    expect(again).toMatchObject({ encoded: 0, cached: build.encoded + build.cached, stored_bytes: 0, aliased: 0 });
    expect(await listObjects(client!, bucket)).toEqual(objects);

    // Blob objects deleted behind the store's back: a small one, whose bytes also travel inline in
    // its entry object (reads are answered from there), and the largest.
    const blobs = objects.filter((o) => o.key.startsWith('caches/default/blobs/')).sort((a, b) => a.sizeBytes - b.sizeBytes);
    const damaged = [blobs[0]!, blobs.at(-1)!];
    for (const blob of damaged) await client!.send(new DeleteObjectCommand({ Bucket: bucket, Key: blob.key }));
    const { json: broken } = await runJson<VerifyJson>(['verify', url], 1);
    expect(broken.store.problems.map((p) => p.code)).toEqual(['BLOB_MISSING', 'BLOB_MISSING']);
    // A plain build HEADs each cached tensor's object: it puts back the largest; the small one's
    // check is answered by its inline copy (which serves its reads), so that is left to --repair.
    const { json: plain } = await runJson<BuildJson>(['build', indexPath, '--out', url]);
    expect(plain).toMatchObject({ encoded: 0, repaired: 1, stored_bytes: damaged[1]!.sizeBytes });
    expect(plain.tensors.filter((t) => t.repaired).map((t) => t.repairedBlob)).toEqual(['missing']);
    expect((await runJson<VerifyJson>(['verify', url], 1)).json.store.problems.map((p) => p.code)).toEqual(['BLOB_MISSING']);
    const { json: repaired } = await runJson<BuildJson>(['build', indexPath, '--out', url, '--repair']);
    expect(repaired).toMatchObject({ encoded: 0, repaired: 1, stored_bytes: damaged[0]!.sizeBytes });
    expect((await runJson<VerifyJson>(['verify', url, '--model', indexPath])).json.ok).toBe(true);
    const restored = await listObjects(client!, bucket);
    expect((await runJson<BuildJson>(['build', indexPath, '--out', url, '--repair'])).json.repaired).toBe(0);
    expect(await listObjects(client!, bucket)).toEqual(restored);

    // gc finds nothing to remove in a complete cache, at the smallest minimum age it takes.
    const { json: gc } = await runJson<{ orphanBlobs: string[]; tempFiles: string[]; unknownFiles: string[] }>(['gc', url, '--min-age', '35m']);
    expect(gc).toMatchObject({ orphanBlobs: [], tempFiles: [], unknownFiles: [] });
    expect(await listObjects(client!, bucket)).toEqual(restored);
  });
});

describe('an unreachable S3 endpoint', () => {
  it('fails build, verify, inspect and gc with one S3_UNAVAILABLE line and exit 1', async () => {
    // A port nobody listens on: bind one, note it, close it.
    const port = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    const env = { AWS_ENDPOINT_URL: `http://127.0.0.1:${port}`, AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${port}`, AWS_ACCESS_KEY_ID: 'dummy', AWS_SECRET_ACCESS_KEY: 'dummy' };
    const url = 's3://splitzip-nowhere/cache';
    const runs = await Promise.all([
      runCli(['build', indexPath, '--out', url, '--quiet'], { env }),
      runCli(['verify', url], { env }),
      runCli(['inspect', url], { env }),
      runCli(['gc', url, '--min-age', '1h'], { env }),
    ]);
    for (const result of runs) {
      expect(result.code, result.stderr).toBe(1);
      const lines = result.stderr.trim().split('\n');
      expect(lines, result.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(/^splitzip \w+: error: S3_UNAVAILABLE: .*127\.0\.0\.1:\d+.*retry later/);
      expect(result.stdout).toBe('');
    }
  });

  it('rejects a bad --min-age and --min-age on a directory (usage, exit 2)', async () => {
    const bad = await runCli(['gc', 's3://splitzip-nowhere/cache', '--min-age', '1 week']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--min-age' takes a duration/);
    const dir = await runCli(['gc', join(temp.path, 'nothing'), '--min-age', '1h']);
    expect(dir.code).toBe(2);
    expect(dir.stderr).toMatch(/s3:\/\/ caches only/);
  });
});
