// s3:// models (build, verify --model, stats) against the Ceph gateway: a model read from a bucket as
// the runtime reads it, its shards' ETags recorded as object stamps in a directory cache and in an
// s3:// cache; two revisions of one model (same shard names, other ETags) side by side in one s3://
// cache (cache.json format 2); a local model there keeps one binding per slice; the errors.
import { createServer } from 'node:net';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { openSafetensorsModel } from '@splitzip/safetensors';
import { openCacheStore } from '@splitzip/store';
import { createBucket, listKeys } from '@splitzip/test-support/s3';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildCache, isBuilderError } from '../src/index.js';
import { verifyModelCache } from '../src/verify-model-cache.js';
import { createTempDir, gaussianBf16, mixedTensors, writeShardedTestModel, type TempDir, type TensorData } from './helpers/models.js';
import type { BuildJson, InspectJson, StatsJson, VerifyJson } from './helpers/reports.js';
import { assertBuilt, runCli, runJson } from './helpers/run-cli.js';
import { describeS3, dropBucket, gatewayProblem, rawClient, uniqueBucket } from './helpers/s3.js';

const CHANGED = 'model.layers.0.self_attn.q_proj.weight';
/** Small enough that the mixed model spans several shards. */
const MAX_SHARD_BYTES = 40_000;

let temp: TempDir;
const client: S3Client | undefined = gatewayProblem ? undefined : rawClient();
const bucket = uniqueBucket('s3model');
let prefixes = 0;

/** Revision A: the mixed model; B: the same layout with CHANGED's values other. */
const revisionA = (): TensorData[] => mixedTensors(7);
const revisionB = (): TensorData[] => mixedTensors(7).map((t) => (t.name === CHANGED ? gaussianBf16(CHANGED, t.shape, 999) : t));

/** Writes the model locally (its own directory) and uploads its files below a fresh prefix: the local directory and the s3:// URL. */
async function uploadModel(tensors: TensorData[], maxShardBytes = MAX_SHARD_BYTES): Promise<{ dir: string; url: string; prefix: string }> {
  const prefix = `models/m${prefixes++}/`;
  const dir = join(temp.path, prefix);
  await writeShardedTestModel(dir, tensors, maxShardBytes);
  for (const name of await readdir(dir)) {
    await client!.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${name}`, Body: await readFile(join(dir, name)) }));
  }
  return { dir, url: `s3://${bucket}/${prefix}`, prefix };
}

async function getText(key: string): Promise<string> {
  const reply = await client!.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  return reply.Body!.transformToString();
}

/** The slice key of a tensor of a local model. */
async function sliceOf(dir: string, name: string): Promise<{ shardName: string; offsetBytes: number; sizeBytes: number }> {
  const model = await openSafetensorsModel(dir);
  try {
    return { ...model.tensors.find((t) => t.name === name)!.slice };
  } finally {
    await model.close();
  }
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

describeS3('splitzip with an s3:// model', () => {
  it('builds into a directory cache and into an s3:// cache; both verify bit-exact against the s3:// model (stamps recorded) and a local copy', async () => {
    const { dir, url } = await uploadModel(revisionA());
    const local = await openSafetensorsModel(dir);
    const tensorCount = local.tensors.length;
    await local.close();
    for (const cache of [join(temp.path, 'dir-cache'), `s3://${bucket}/caches/one`]) {
      // The s3:// cache's build through workers (they take the bytes read on the main thread).
      const jobs = cache.startsWith('s3://') ? ['--jobs', '2', '--inline-max-mib', '0'] : ['--jobs', '0'];
      const { json: build } = await runJson<BuildJson>(['build', url, '--out', cache, ...jobs]);
      expect(build.model).toBe(url);
      expect(build.workers).toBe(jobs[1] === '2' ? 2 : 0);
      expect(build.tensors).toHaveLength(tensorCount);
      expect(build.encoded).toBeGreaterThan(3);
      expect(build.aliased).toBe(build.tensors.filter((t) => (t.status === 'encoded' || t.status === 'cached') && t.sizeBytes > 0).length);

      // Against the s3:// model: every cached tensor bit-exact, and its binding records the shard's
      // ETag (trusted: not `unrecorded`). Before, an s3:// model was a usage error.
      const { json: remote } = await runJson<VerifyJson>(['verify', cache, '--model', url]);
      expect(remote.ok, JSON.stringify(remote.model?.tensors.filter((t) => t.status === 'failed'))).toBe(true);
      expect(remote.model!.totals).toMatchObject({ tensors: tensorCount, failed: 0, ok: build.encoded + build.cached });
      expect(remote.model!.tensors.filter((t) => t.unrecorded === true)).toEqual([]);
      // Against the local copy: the same bytes (checked once per file by a load: unrecorded there).
      const { json: copy } = await runJson<VerifyJson>(['verify', cache, '--model', dir]);
      expect(copy.ok).toBe(true);
      expect(copy.model!.totals).toMatchObject({ tensors: tensorCount, failed: 0, ok: build.encoded + build.cached });

      // A tensor larger than a block is read in ranged reads of its shard object (1 KiB blocks here).
      const opened = await openCacheStore(cache, { create: false });
      try {
        const blocked = await verifyModelCache(opened, url, { coverageMin: opened.coverageMin, blockBytes: 1024 });
        expect(blocked.totals).toEqual(remote.model!.totals);
      } finally {
        await opened.close();
      }

      // The stamps are the objects' ETags, in either cache (an s3:// cache took none before).
      const store = await openCacheStore(cache, { create: false });
      try {
        const slice = await sliceOf(dir, CHANGED);
        const binding = store.lookupSliceBinding(slice.shardName, slice.offsetBytes, slice.sizeBytes);
        expect(binding?.stamps.length).toBe(1);
        expect(binding!.stamps[0]).toMatch(/^etag:"[0-9a-f]{32}"$/);
      } finally {
        await store.close();
      }
    }
  });

  it('stats reads an s3:// model as it reads the local copy', async () => {
    const { dir, url } = await uploadModel(revisionA());
    const { json: remote } = await runJson<StatsJson>(['stats', url]);
    const { json: copy } = await runJson<StatsJson>(['stats', dir]);
    expect(remote.model).toBe(url);
    expect({ ...remote, model: null }).toEqual({ ...copy, model: null });
  });

  it('two revisions (same shard names, one tensor changed) in one s3:// cache: each keeps its binding, each verifies; cache.json moves to format 2', async () => {
    const a = await uploadModel(revisionA());
    const b = await uploadModel(revisionB());
    const cache = `s3://${bucket}/caches/revisions`;
    const { json: first } = await runJson<BuildJson>(['build', a.url, '--out', cache, '--jobs', '0']);
    expect(JSON.parse(await getText('caches/revisions/cache.json')).format).toBe(1);
    expect(first.cache_format_moved).toBe(false);
    // Before: SLICE_CONFLICT (one binding per slice on s3://).
    const { json: second } = await runJson<BuildJson>(['build', b.url, '--out', cache, '--jobs', '0']);
    // The build that moves cache.json to format 2 says so, as a directory cache's (it said false on s3://).
    expect(second.cache_format_moved).toBe(true);
    expect(second.encoded).toBe(1);
    expect(second.tensors.find((t) => t.name === CHANGED)!.status).toBe('encoded');
    expect(second.cached).toBe(first.encoded + first.cached - 1);
    expect(JSON.parse(await getText('caches/revisions/cache.json')).format).toBe(2);

    for (const revision of [a, b]) {
      const { json } = await runJson<VerifyJson>(['verify', cache, '--model', revision.url]);
      expect(json.ok, JSON.stringify(json.model?.tensors.filter((t) => t.status !== 'ok'))).toBe(true);
      expect(json.model!.totals.failed).toBe(0);
      // Each revision's binding holds its own ETag: trusted, nothing to check again at a load.
      expect(json.model!.tensors.filter((t) => t.unrecorded === true)).toEqual([]);
    }
    // The changed tensor's slice: two alias objects (one per revision's entry), two bindings.
    const slice = await sliceOf(a.dir, CHANGED);
    const sliceDir = `caches/revisions/slices/${Buffer.from(slice.shardName).toString('base64url')}/${slice.offsetBytes}-${slice.sizeBytes}/`;
    const aliases = await listKeys(client!, bucket, sliceDir);
    expect(aliases).toHaveLength(2);
    const store = await openCacheStore(cache, { create: false });
    try {
      expect(store.lookupSliceBindings(slice.shardName, slice.offsetBytes, slice.sizeBytes)).toHaveLength(2);
    } finally {
      await store.close();
    }
    const { json: inspect } = await runJson<InspectJson>(['inspect', cache]);
    expect(inspect.totals.slicesWithSeveralBindings).toBe(1);
    // Built again: format 2 already, nothing moved.
    const { json: again } = await runJson<BuildJson>(['build', b.url, '--out', cache, '--jobs', '0']);
    expect(again.cache_format_moved).toBe(false);

    // A local model into that cache: one binding per slice as before (no object stamps to tell its
    // file by): SLICE_CONFLICT, nothing bound beside; --rebind moves the latest binding.
    const c = await uploadModel(mixedTensors(7).map((t) => (t.name === CHANGED ? gaussianBf16(CHANGED, t.shape, 4242) : t)));
    const refused = await runCli(['build', c.dir, '--out', cache, '--jobs', '0', '--quiet']);
    expect(refused.code, refused.stderr).toBe(1);
    expect(refused.stderr).toMatch(/SLICE_CONFLICT/);
    expect(refused.stderr).toContain("an s3:// cache binds a slice to one entry where a local model's files are concerned");
    expect(await listKeys(client!, bucket, sliceDir)).toHaveLength(2);
    await runJson<BuildJson>(['build', c.dir, '--out', cache, '--jobs', '0', '--rebind']);
    const { json: rebound } = await runJson<VerifyJson>(['verify', cache, '--model', c.dir]);
    expect(rebound.ok).toBe(true);
  });

  it('two revisions in one directory cache (FILE-BINDINGS.md phase 3): each keeps its ETag binding, each verifies trusted; manifest format 4; a local revision binds beside', async () => {
    const a = await uploadModel(revisionA());
    const b = await uploadModel(revisionB());
    const cache = join(temp.path, 'dir-revisions');
    const { json: first } = await runJson<BuildJson>(['build', a.url, '--out', cache, '--jobs', '0']);
    expect(first.cache_object_format_moved).toBe(false);
    // Before: SLICE_CONFLICT (a directory cache bound a slice beside another only by file stamps).
    const { json: second } = await runJson<BuildJson>(['build', b.url, '--out', cache, '--jobs', '0']);
    expect(second.encoded).toBe(1);
    expect(second.cached).toBe(first.encoded + first.cached - 1);
    expect(second.cache_object_format_moved).toBe(true);
    expect(JSON.parse(await readFile(join(cache, 'manifest.json'), 'utf8')).format).toBe(4);
    for (const revision of [a, b]) {
      const { json } = await runJson<VerifyJson>(['verify', cache, '--model', revision.url]);
      expect(json.ok, JSON.stringify(json.model?.tensors.filter((t) => t.status !== 'ok'))).toBe(true);
      expect(json.model!.tensors.filter((t) => t.unrecorded === true)).toEqual([]);
    }
    const slice = await sliceOf(a.dir, CHANGED);
    const store = await openCacheStore(cache);
    try {
      expect(store.lookupSliceBindings(slice.shardName, slice.offsetBytes, slice.sizeBytes)).toHaveLength(2);
    } finally {
      await store.close();
    }
    // A local revision of the model: its file's binding goes beside the objects' (no --rebind).
    const c = await uploadModel(mixedTensors(7).map((t) => (t.name === CHANGED ? gaussianBf16(CHANGED, t.shape, 4242) : t)));
    await runJson<BuildJson>(['build', c.dir, '--out', cache, '--jobs', '0']);
    for (const model of [a.url, b.url, c.dir]) {
      const { json } = await runJson<VerifyJson>(['verify', cache, '--model', model]);
      expect(json.ok, model).toBe(true);
    }
  });

  it("a build's format line: cache.json format 2 on an s3:// cache (no manifest there); one line of format 4 where a directory cache moves to 3 and 4 at once", async () => {
    const a = await uploadModel(revisionA());
    const b = await uploadModel(revisionB());
    const formatLines = (out: string): string[] =>
      out
        .replace(/\n {8}/g, ' ')
        .split('\n')
        .filter((line) => line.startsWith('format  '));
    for (const cache of [`s3://${bucket}/caches/format-line`, join(temp.path, 'dir-format-line')]) {
      const first = await runCli(['build', a.url, '--out', cache, '--jobs', '0', '--quiet']);
      expect(first.code, first.stderr).toBe(0);
      expect(formatLines(first.stdout)).toEqual([]);
      const second = await runCli(['build', b.url, '--out', cache, '--jobs', '0', '--quiet']);
      expect(second.code, second.stderr).toBe(0);
      // Before: "manifest format 3, which releases before 0.56 …" on s3://; both lines in a directory cache.
      expect(formatLines(second.stdout), cache).toEqual([
        cache.startsWith('s3://')
          ? 'format  the cache now binds a slice for more than one revision of an s3:// object: its cache.json is written as format 2, which releases up to 0.56 can no longer read (UNSUPPORTED_FORMAT); keep them off this cache'
          : 'format  the cache now binds a slice for an s3:// object beside another revision: it is written as manifest format 4, which releases up to 0.57 can no longer read (UNSUPPORTED_FORMAT); keep them off this cache',
      ]);
    }
  });

  it("verify --model after a shard object was replaced by another revision: not bound for this revision, the other's binding kept, a plain build binds it (not --rebind); exit 1 until then", async () => {
    const a = await uploadModel(revisionA());
    const b = await uploadModel(revisionB());
    for (const cache of [join(temp.path, 'dir-replaced'), `s3://${bucket}/caches/replaced`]) {
      // The model's prefix holds revision A, then its shard objects are replaced by revision B's.
      const model = await uploadModel(revisionA());
      await runJson<BuildJson>(['build', model.url, '--out', cache, '--jobs', '0']);
      for (const name of await readdir(b.dir)) {
        await client!.send(new PutObjectCommand({ Bucket: bucket, Key: `${model.prefix}${name}`, Body: await readFile(join(b.dir, name)) }));
      }
      const { json } = await runJson<VerifyJson>(['verify', cache, '--model', model.url], 1);
      const failed = json.model!.tensors.filter((t) => t.status === 'failed');
      expect(failed.map((t) => t.name)).toEqual([CHANGED]);
      // Before: `stale` ("holds other bytes (changed, or another model's): run build --rebind").
      expect(failed[0]).toMatchObject({ otherRevision: true });
      expect(failed[0]).not.toHaveProperty('stale');
      expect(failed[0]!.reason).toMatch(/^not bound for this revision of the object \(etag:"[0-9a-f]{32}"\): its slice is bound to entry \w+ for another revision \(recorded against etag:"[0-9a-f]{32}"\), which stays: run build of this revision, which binds it beside the other$/);
      const text = await runCli(['verify', cache, '--model', model.url]);
      expect(text.code).toBe(1);
      const flat = text.stdout.replace(/\n {4,}/g, ' ');
      expect(flat).not.toContain('run build --rebind');
      expect(flat).toContain(`another revision's bindings, not damage: \`splitzip build ${model.url} --out ${cache}\` binds this revision's tensors beside them`);
      // The remedy it names: a plain build binds this revision beside; both revisions verify.
      await runJson<BuildJson>(['build', model.url, '--out', cache, '--jobs', '0']);
      const { json: after } = await runJson<VerifyJson>(['verify', cache, '--model', model.url]);
      expect(after.ok).toBe(true);
      const { json: other } = await runJson<VerifyJson>(['verify', cache, '--model', a.url]);
      expect(other.ok).toBe(true);
    }
  });

  it('errors: no shards at the prefix, a missing bucket, an unreachable endpoint, an object given as the model', async () => {
    const out = join(temp.path, 'error-cache');
    // A cache for verify --model to open (the model is what fails).
    const model = await uploadModel(revisionA());
    await runJson<BuildJson>(['build', model.dir, '--out', out, '--jobs', '0']);
    const empty = await runCli(['build', `s3://${bucket}/nothing-here/`, '--out', out, '--quiet']);
    expect(empty.code, empty.stderr).toBe(1);
    expect(empty.stderr.trim().split('\n')).toHaveLength(1);
    expect(empty.stderr).toContain(`s3://${bucket}/nothing-here/`);

    const missing = await runCli(['build', 's3://splitzip-no-such-bucket-a1/model', '--out', out, '--quiet']);
    expect(missing.code, missing.stderr).toBe(1);
    expect(missing.stderr.trim().split('\n')).toHaveLength(1);
    expect(missing.stderr).toContain('the model s3://splitzip-no-such-bucket-a1/model/');

    const port = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    const env = { AWS_ENDPOINT_URL: `http://127.0.0.1:${port}`, AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${port}`, AWS_ACCESS_KEY_ID: 'dummy', AWS_SECRET_ACCESS_KEY: 'dummy' };
    for (const args of [['build', 's3://splitzip-nowhere/model', '--out', out], ['stats', 's3://splitzip-nowhere/model'], ['verify', out, '--model', 's3://splitzip-nowhere/model']]) {
      const down = await runCli([...args, '--quiet'], { env });
      // Exit 1, one line, as for an unreachable s3:// cache; the model named.
      expect(down.code, down.stderr).toBe(1);
      const lines = down.stderr.trim().split('\n');
      expect(lines, down.stderr).toHaveLength(1);
      expect(lines[0]).toMatch(/^splitzip \w+: error: S3_UNAVAILABLE: the model s3:\/\/splitzip-nowhere\/model\/: .*127\.0\.0\.1:\d+.*retry later/);
    }

    await expect(buildCache({ model: `s3://${bucket}/models/m0/model-00001-of-00003.safetensors`, cacheDir: out, jobs: 0 })).rejects.toSatisfy(
      (error: unknown) => isBuilderError(error, 'USAGE') && /the prefix that holds its shards/.test((error as Error).message) && (error as Error).message.includes(`s3://${bucket}/models/m0/,`),
    );
  });

  it('a shard object replaced while build or verify --model reads it: MODEL_CHANGED (the model changed while being read), what the build committed stays valid', async () => {
    // Many tensors over two shards: the second shard is replaced once the first tensor is done,
    // long before the build reads that far (at most 32 tensors in flight).
    const tensors = Array.from({ length: 80 }, (_, i) => gaussianBf16(`layer.${String(i).padStart(2, '0')}.weight`, [64, 64], 100 + i));
    const { dir, url, prefix } = await uploadModel(tensors, 40 * 64 * 64 * 2 + 4096);
    const shards = (await readdir(dir)).filter((name) => name.endsWith('.safetensors')).sort();
    expect(shards).toHaveLength(2);
    const cache = join(temp.path, 'changed-cache');
    let replaced: Promise<unknown> | undefined;
    const failure = await buildCache({
      model: url,
      cacheDir: cache,
      jobs: 0,
      onProgress(event) {
        if (event.type !== 'tensor' || replaced) return;
        replaced = readFile(join(dir, shards[1]!)).then((bytes) => {
          bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 1;
          return client!.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}${shards[1]}`, Body: bytes }));
        });
      },
    }).then(
      () => undefined,
      (error: unknown) => error,
    );
    await replaced;
    expect(isBuilderError(failure, 'MODEL_CHANGED'), String(failure)).toBe(true);
    expect((failure as Error).message).toMatch(/the model changed while being read: s3:\/\/.*model-00002-of-00002\.safetensors was replaced/);
    // What the build committed is a valid cache.
    const verify = await runCli(['verify', cache, '--quiet']);
    expect(verify.code, verify.stderr + verify.stdout).toBe(0);

    // verify --model alike: the model (opened before) changes under the check.
    const { url: fresh, prefix: freshPrefix } = await uploadModel(tensors, 40 * 64 * 64 * 2 + 4096);
    const store = await openCacheStore(cache, { create: false });
    try {
      let again: Promise<unknown> | undefined;
      const checked = await verifyModelCache(store, fresh, {
        coverageMin: store.coverageMin,
        onProgress() {
          again ??= readFile(join(dir, shards[1]!)).then((bytes) =>
            client!.send(new PutObjectCommand({ Bucket: bucket, Key: `${freshPrefix}${shards[1]}`, Body: bytes.subarray(0, bytes.length - 2) })),
          );
        },
      }).then(
        () => undefined,
        (error: unknown) => error,
      );
      await again;
      expect(isBuilderError(checked, 'MODEL_CHANGED'), String(checked)).toBe(true);
      expect((checked as Error).message).toMatch(/the model changed while being read: s3:\/\/.*model-00002-of-00002\.safetensors was replaced .*; run verify again/);
    } finally {
      await store.close();
    }
  });
});
