// An s3:// model's shard (an object stamp, `etag:"…"`) at a slice that other files or objects
// bound already (Ceph gateway): in a directory cache their bindings are never unbound nor moved for
// it (a plain build of the s3:// copy of a revision there unbound the other local revision's binding,
// whose verify then failed): its binding goes beside them (FILE-BINDINGS.md phase 3, manifest format
// 4), plain build or --rebind; in an s3:// cache a local model's binding in its way is a
// SLICE_CONFLICT worded as such. And an s3:// cache in or around the s3:// model's
// prefix is a usage error before anything is written.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { createBucket, listKeys } from '@splitzip/test-support/s3';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, mixedTensors, writeShardedTestModel, type TempDir, type TensorData } from './helpers/models.js';
import type { BuildJson, InspectJson, VerifyJson } from './helpers/reports.js';
import { assertBuilt, runCli, runJson } from './helpers/run-cli.js';
import { describeS3, dropBucket, gatewayProblem, rawClient, uniqueBucket } from './helpers/s3.js';

const CHANGED = 'model.layers.0.self_attn.q_proj.weight';
const MAX_SHARD_BYTES = 40_000;

let temp: TempDir;
const client: S3Client | undefined = gatewayProblem ? undefined : rawClient();
const bucket = uniqueBucket('beside');
let prefixes = 0;

/** Revision A: the mixed model; B: CHANGED's values other. */
const revisionA = (): TensorData[] => mixedTensors(7);
const revisionB = (): TensorData[] => mixedTensors(7).map((t) => (t.name === CHANGED ? gaussianBf16(CHANGED, t.shape, 999) : t));

/** Writes the model locally and uploads its files below a fresh prefix. */
async function uploadModel(tensors: TensorData[]): Promise<{ dir: string; url: string }> {
  const prefix = `models/m${prefixes++}/`;
  const dir = join(temp.path, prefix);
  await writeShardedTestModel(dir, tensors, MAX_SHARD_BYTES);
  for (const name of await readdir(dir)) {
    await client!.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${name}`, Body: await readFile(join(dir, name)) }));
  }
  return { dir, url: `s3://${bucket}/${prefix}` };
}

async function expectVerified(cache: string, model: string): Promise<void> {
  const result = await runCli(['verify', cache, '--model', model, '--json']);
  const json = JSON.parse(result.stdout) as VerifyJson;
  expect(json.ok, `${model}: ${JSON.stringify(json.model?.tensors.filter((t) => t.status !== 'ok'))}`).toBe(true);
}

beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir();
  if (client) await createBucket(client, bucket);
});
afterAll(async () => {
  if (client) {
    await dropBucket(client, bucket);
    client.destroy();
  }
  await temp?.cleanup();
});

describeS3('an s3:// model beside other files and objects', () => {
  it("a directory cache with two local revisions: a plain build of revision B's s3:// copy leaves revision A's binding (A still verifies)", async () => {
    const a = await uploadModel(revisionA());
    const b = await uploadModel(revisionB());
    const cache = join(temp.path, 'two-local');
    await runJson<BuildJson>(['build', a.dir, '--out', cache, '--jobs', '0']);
    await runJson<BuildJson>(['build', b.dir, '--out', cache, '--jobs', '0']);
    const { json: built } = await runJson<BuildJson>(['build', b.url, '--out', cache, '--jobs', '0']);
    // Before: A's binding of CHANGED was "in the way" of B's object and unbound (unbound_stale 1).
    expect(built.unbound_stale).toBe(0);
    expect(built.tensors.filter((t) => t.unboundFrom !== undefined)).toEqual([]);
    const { json: inspect } = await runJson<InspectJson>(['inspect', cache]);
    expect(inspect.totals.slicesWithSeveralBindings).toBe(1);
    await expectVerified(cache, a.dir);
    await expectVerified(cache, b.dir);
    await expectVerified(cache, b.url);
  });

  it("a directory cache with a local revision: revision B's s3:// copy binds beside the local file's binding (phase 3), plain or --rebind, which stays", async () => {
    const a = await uploadModel(revisionA());
    const b = await uploadModel(revisionB());
    const cache = join(temp.path, 'one-local');
    await runJson<BuildJson>(['build', a.dir, '--out', cache, '--jobs', '0']);
    for (const rebind of [[], ['--rebind']]) {
      // Until FILE-BINDINGS.md phase 3 the store bound no object beside another file's binding:
      // SLICE_CONFLICT (and before that the plain build unbound A's binding, --rebind moved it).
      const { json: built } = await runJson<BuildJson>(['build', b.url, '--out', cache, '--jobs', '0', ...rebind]);
      expect(built.unbound_stale).toBe(0);
      expect(built.tensors.filter((t) => t.unboundFrom !== undefined || t.unaliased === true)).toEqual([]);
      // The first object binding beside another moves the manifest to format 4, once.
      expect(built.cache_object_format_moved).toBe(rebind.length === 0);
    }
    expect(JSON.parse(await readFile(join(cache, 'manifest.json'), 'utf8')).format).toBe(4);
    const { json: inspect } = await runJson<InspectJson>(['inspect', cache]);
    expect(inspect.totals.slicesWithSeveralBindings).toBe(1);
    // A's binding was neither unbound nor moved: A still verifies, and so does B.
    await expectVerified(cache, a.dir);
    await expectVerified(cache, b.url);
  });

  it('a directory cache with an s3:// revision: another s3:// revision binds beside it (phase 3), plain or --rebind; the first still verifies', async () => {
    const a = await uploadModel(revisionA());
    const b = await uploadModel(revisionB());
    const cache = join(temp.path, 'one-object');
    await runJson<BuildJson>(['build', a.url, '--out', cache, '--jobs', '0']);
    for (const rebind of [[], ['--rebind']]) {
      const { json: built } = await runJson<BuildJson>(['build', b.url, '--out', cache, '--jobs', '0', ...rebind]);
      expect(built.unbound_stale).toBe(0);
      expect(built.tensors.filter((t) => t.unboundFrom !== undefined || t.unaliased === true)).toEqual([]);
      expect(built.cache_object_format_moved).toBe(rebind.length === 0);
    }
    const { json: inspect } = await runJson<InspectJson>(['inspect', cache]);
    expect(inspect.totals.slicesWithSeveralBindings).toBe(1);
    await expectVerified(cache, a.url);
    await expectVerified(cache, b.url);
  });

  it("an s3:// cache with a local model's binding: an s3:// model's SLICE_CONFLICT names that binding (no object stamp), not a directory cache or s3:// copies of both", async () => {
    const a = await uploadModel(revisionA());
    const b = await uploadModel(revisionB());
    const cache = `s3://${bucket}/caches/local-first`;
    await runJson<BuildJson>(['build', a.dir, '--out', cache, '--jobs', '0']);
    const refused = await runCli(['build', b.url, '--out', cache, '--jobs', '0', '--quiet']);
    expect(refused.code, refused.stderr).toBe(1);
    expect(refused.stderr).toContain("(an s3:// model's shard, stamped by its ETag) is already bound to another entry");
    expect(refused.stderr).toContain('recorded with no object stamp');
    expect(refused.stderr).not.toContain('build both into a directory cache');
    expect(refused.stderr).not.toContain('build both from s3:// copies');
  });

  it("an s3:// cache at, inside or around the s3:// model's prefix: USAGE (exit 2), nothing written", async () => {
    const a = await uploadModel(revisionA());
    const inside = `${a.url}cache`;
    const around = `s3://${bucket}/models/`;
    for (const cache of [a.url, inside, around]) {
      const refused = await runCli(['build', a.url, '--out', cache, '--jobs', '0', '--quiet']);
      expect(refused.code, `${cache}: ${refused.stderr}`).toBe(2);
      expect(refused.stderr).toMatch(/USAGE|usage/);
      expect(refused.stderr).toContain(cache);
    }
    // Only the model's own objects: no cache.json, entry or slice written anywhere.
    expect((await listKeys(client!, bucket, 'models/')).filter((key) => !/^models\/m\d+\/model[^/]*$/.test(key))).toEqual([]);
    // A sibling prefix is fine.
    await runJson<BuildJson>(['build', a.url, '--out', `s3://${bucket}/models-cache/`, '--jobs', '0']);
  });
});
