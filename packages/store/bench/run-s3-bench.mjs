// S3 benchmark of @splitzip/store (separate from the filesystem bench): readBlob from an S3 gateway
// on loopback versus a raw GET of same-size objects, and with the read-through directory (first pass
// fills it, second pass reads it), all in the same run on the same machine.
// Needs a gateway: bash scripts/ceph/start-ceph.sh, then source <dir>/env (see the README).
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const { CreateBucketCommand, DeleteBucketCommand, DeleteObjectsCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } = await import('@aws-sdk/client-s3');
const { calibrateCodebook, encode, getCodecBackend } = await import('@splitzip/codec');
const { openCacheStore, computeContentKey } = await import('../dist/index.js');

const endpoint = process.env.AWS_ENDPOINT_URL_S3 ?? process.env.AWS_ENDPOINT_URL;
if (!endpoint) {
  console.error('run-s3-bench: AWS_ENDPOINT_URL is not set (start a gateway with scripts/ceph/start-ceph.sh and source its env file)');
  process.exit(1);
}
const TENSORS = Number(process.env.S3_BENCH_TENSORS ?? 8);
const VALUES = Number(process.env.S3_BENCH_VALUES ?? 6_000_000); // 12 MB raw BF16 per tensor
const ROUNDS = 3;

function makeValues(count, seed) {
  const values = new Uint16Array(count);
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  let a = seed >>> 0;
  for (let i = 0; i < count; i++) {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    f32[0] = ((((t ^ (t >>> 14)) >>> 0) / 4294967296) - 0.5) * 0.1;
    values[i] = u32[0] >>> 16;
  }
  return values;
}

const bucket = `sz-bench-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
const raw = new S3Client({ endpoint, forcePathStyle: true, region: process.env.AWS_REGION ?? 'us-east-1', requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' });
await raw.send(new CreateBucketCommand({ Bucket: bucket }));
const rtDir = await mkdtemp(join(tmpdir(), 'splitzip-s3-bench-'));
try {
  const store = await openCacheStore(`s3://${bucket}/cache`, { create: true });
  const keys = [];
  let payloadBytes = 0;
  for (let i = 0; i < TENSORS; i++) {
    const values = makeValues(VALUES, 1000 + i);
    const bytes = new Uint8Array(values.buffer);
    const payload = encode(values, calibrateCodebook(values).codebook);
    const key = computeContentKey(bytes, [VALUES], 'BF16');
    await store.addEntry({ key, qualname: `t${i}`, payload, shape: [VALUES], dtype: 'BF16', sha256: createHash('sha256').update(bytes).digest('hex') });
    // The baseline: an object of the same size, fetched with a plain GetObject.
    await raw.send(new PutObjectCommand({ Bucket: bucket, Key: `raw/${i}`, Body: Buffer.from(payload.subarray(0, store.getEntry(key).compBytes)) }));
    keys.push(key);
    payloadBytes += store.getEntry(key).compBytes;
  }
  const slot = new Uint8Array(Math.max(...keys.map((k) => store.getEntry(k).compBytes)));
  const time = async (fn) => {
    const t0 = performance.now();
    await fn();
    return (performance.now() - t0) / 1000;
  };
  const rawGet = () => time(async () => {
    for (let i = 0; i < TENSORS; i++) {
      const out = await raw.send(new GetObjectCommand({ Bucket: bucket, Key: `raw/${i}` }));
      await out.Body.transformToByteArray();
    }
  });
  const readAll = (s) => time(async () => {
    for (const key of keys) await s.readBlob(key, slot);
  });
  const best = { raw: Infinity, store: Infinity, rtCold: Infinity, rtWarm: Infinity };
  for (let round = 0; round < ROUNDS; round++) {
    best.raw = Math.min(best.raw, await rawGet());
    best.store = Math.min(best.store, await readAll(store));
    // A fresh read-through directory per round: the first pass fetches and fills it, the second reads it.
    const dir = join(rtDir, `r${round}`);
    const rt = await openCacheStore(`s3://${bucket}/cache`, { s3: { readThroughDir: dir } });
    best.rtCold = Math.min(best.rtCold, await readAll(rt));
    best.rtWarm = Math.min(best.rtWarm, await readAll(rt));
    await rt.close();
  }
  await store.close();
  const gbps = (s) => (payloadBytes / s / 1e9).toFixed(3);
  const rows = [
    ['readBlob from S3 (checks + XXH32)', gbps(best.store), 'raw GetObject of same-size objects', gbps(best.raw), (best.raw / best.store).toFixed(2)],
    ['readBlob, read-through dir, first pass (fetch + local write)', gbps(best.rtCold), 'raw GetObject of same-size objects', gbps(best.raw), (best.raw / best.rtCold).toFixed(2)],
    ['readBlob, read-through dir, second pass (local disk)', gbps(best.rtWarm), 'readBlob from S3 (no read-through)', gbps(best.store), (best.store / best.rtWarm).toFixed(2)],
  ];
  console.log(`@splitzip/store S3 benchmark — node ${process.version}, codec ${getCodecBackend()}, endpoint ${endpoint}, ${new Date().toISOString()}, load ${loadavg()[0].toFixed(1)}`);
  console.log(`${TENSORS} blobs, ${(payloadBytes / 2 ** 20).toFixed(1)} MiB in all; best of ${ROUNDS} alternating rounds; ratio = speed / baseline speed`);
  console.log('| measurement | GB/s | baseline | baseline GB/s | ratio |');
  console.log('|---|---|---|---|---|');
  for (const row of rows) console.log(`| ${row.join(' | ')}x |`);
} finally {
  for (;;) {
    const page = await raw.send(new ListObjectsV2Command({ Bucket: bucket }));
    if (!page.Contents?.length) break;
    await raw.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: page.Contents.map((o) => ({ Key: o.Key })), Quiet: true } }));
  }
  await raw.send(new DeleteBucketCommand({ Bucket: bucket })).catch(() => undefined);
  raw.destroy();
  await rm(rtDir, { recursive: true, force: true });
}
