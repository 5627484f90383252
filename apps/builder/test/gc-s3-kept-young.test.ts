// gc of an s3:// cache says what it removed in alias objects of dropped entries (the store's
// orphanAliases) and what it kept only because younger than --min-age (keptYoung): one short line
// each, only when non-zero, "would" in a dry run; --json carries both, as the README's gc block
// names them. On the gateway, run in this process; the aliases are made old by the store's
// test-only gc below the floor (the CLI refuses --min-age under 35m).
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { openCacheStore, type GcReport, type S3GcOptions } from '@splitzip/store';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { GcCommandReport } from '../src/commands/gc.js';
import { createTempDir, gaussianBf16, writeShardedTestModel, type TempDir } from './helpers/models.js';
import { runInProcess } from './helpers/run-in-process.js';
import { describeS3, dropBucket, gatewayProblem, rawClient, uniqueBucket } from './helpers/s3.js';

let temp: TempDir;
const client = gatewayProblem ? undefined : rawClient();
const bucket = uniqueBucket('gcyoung');
beforeAll(async () => {
  temp = await createTempDir('splitzip-gc-young-');
});
afterAll(async () => {
  if (client) {
    await dropBucket(client, bucket);
    client.destroy();
  }
  await temp?.cleanup();
});

async function gc(...args: string[]): Promise<{ out: string; json: GcCommandReport }> {
  const text = await runInProcess(['gc', ...args]);
  expect(text.code, text.err).toBe(0);
  const json = await runInProcess(['gc', ...args, '--json']);
  expect(json.code, json.err).toBe(0);
  return { out: text.out, json: JSON.parse(json.out) as GcCommandReport };
}

describeS3('gc of an s3:// cache: orphan aliases and what --min-age kept', () => {
  it('a dry run says what it would keep as young; with the aliases old, gc says it removed them; --json and the README name the fields', async () => {
    const prefix = 'caches/young';
    const url = `s3://${bucket}/${prefix}`;
    const v1 = join(temp.path, 'v1');
    const v2 = join(temp.path, 'v2');
    await writeShardedTestModel(v1, [gaussianBf16('a.weight', [64, 64], 2101), gaussianBf16('b.weight', [64, 64], 2102)], 2 * 8192);
    await writeShardedTestModel(v2, [gaussianBf16('a.weight', [64, 64], 2101), gaussianBf16('b.weight', [64, 64], 2199)], 2 * 8192);
    for (const argv of [['build', v1, '--out', url], ['build', v2, '--out', url, '--rebind']]) {
      const built = await runInProcess([...argv, '--jobs', '0', '--quiet']);
      expect(built.code, built.err).toBe(0);
    }
    // v1's b entry dropped (below the floor: it is a moment old): its alias below the slice's top epoch stays, an orphan alias.
    const store = await openCacheStore(url);
    try {
      expect((await store.dropUnboundEntries({ exclusive: true, minAgeMs: 0, allowMinAgeBelowFloorForTests: true } as never)).count).toBe(1);
    } finally {
      await store.close();
    }
    // An orphan blob written just now (a running build's looks the same).
    await client!.send(new PutObjectCommand({ Bucket: bucket, Key: `${prefix}/blobs/${'e'.repeat(40)}.${'f'.repeat(64)}.bin`, Body: Buffer.from('not a blob') }));

    const dry = await gc(url, '--dry-run');
    expect(dry.json).toMatchObject({ dryRun: true, orphanAliases: [], keptYoung: { orphanBlobs: 1, orphanBytes: 10, tempFiles: 0, orphanStamps: 0, orphanAliases: 1 } });
    expect(dry.out).toContain('\nwould keep 1 orphan blob (10 B), 1 alias object younger than --min-age (1h): a later gc removes them\n');
    expect(dry.out).not.toMatch(/alias objects? of dropped entries/);
    // The README's gc --json block names every field (keptYoung's too).
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const block = [...readme.matchAll(/```jsonc\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.startsWith('// splitzip gc --json'))!;
    for (const name of [...Object.keys(dry.json), ...Object.keys(dry.json.keptYoung!)]) expect(block, name).toContain(`"${name}"`);

    // The same objects, old enough: the store's gc below the floor (the CLI's --min-age cannot go there).
    const probe = await openCacheStore(url);
    const proto = Object.getPrototypeOf(probe) as { gc: (options?: S3GcOptions) => Promise<GcReport> };
    await probe.close();
    const original = proto.gc;
    proto.gc = async function (this: unknown, options: S3GcOptions = {}) {
      return original.call(this, { ...options, minAgeMs: 0, allowMinAgeBelowFloorForTests: true });
    };
    try {
      const old = await gc(url, '--dry-run');
      expect(old.json.orphanAliases).toHaveLength(1);
      const [alias] = old.json.orphanAliases!;
      expect(old.out).toContain(`\nwould remove 1 alias object of dropped entries (below their slices' binding)\n  ${alias}\n`);
      expect(old.out).not.toContain('would keep');
      const real = await runInProcess(['gc', url]);
      expect(real.code, real.err).toBe(0);
      expect(real.out).toContain(`\nremoved 1 alias object of dropped entries (below their slices' binding)\n  ${alias}\n`);
      expect(real.out).not.toContain('kept');
    } finally {
      proto.gc = original;
    }
  });
});
