// A thread decoder whose worker script is missing or broken: a `file:` URL of no file is refused at
// creation, and workers that die as they start leave the calling thread to decode every tensor,
// named for it. Before, both were accepted: every tensor for the threads was served raw
// (`cache-failed`, DECODE_FAILED) while `totals.backends` read `threads:2`, a healthy pool's name.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describeValue } from '@splitzip/codec/internal';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFileReader } from '../src/create-file-reader.js';
import { createThreadDecoder } from '../src/create-thread-decoder.js';
import { loadModel } from '../src/load-model.js';
import { loadTensor } from '../src/load-tensor.js';
import { openCachedModel, sameBytes, tunedWeights, type CachedModelFixture } from './fixtures.js';

let fixture: CachedModelFixture;
let brokenScript: URL;
beforeAll(async () => {
  fixture = await openCachedModel('thread-start-failure', tunedWeights(['a', 'b', 'c', 'd'], 31));
  const path = join(fixture.dir, 'broken-decode-thread.mjs');
  writeFileSync(path, "throw new Error('broken worker script');\n");
  brokenScript = pathToFileURL(path);
});
afterAll(async () => {
  await fixture.close();
});

describe('createThreadDecoder with a bad workerUrl', () => {
  it('refuses a file: URL of no file at creation (INVALID_ARGUMENT)', () => {
    const workerUrl = new URL('file:///nonexistent/splitzip-decode-thread.js');
    expect(() => createThreadDecoder({ workerUrl })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', details: expect.objectContaining({ option: 'workerUrl', workerUrl: workerUrl.href }) }));
    expect(() => createThreadDecoder({ workerUrl: '/nonexistent.js' as unknown as URL })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });

  // existsSync holds for a directory: one was taken, and every worker died at start. The kernels'
  // check (checkScriptFile) refused it; both now stat for a file, in one message form.
  it('refuses a file: URL of a directory, in the `<option> must be <what>, got <value>` form', () => {
    const workerUrl = pathToFileURL(fixture.dir);
    let caught: { code?: unknown; message: string; details: Record<string, unknown> } | undefined;
    try {
      createThreadDecoder({ workerUrl });
    } catch (error) {
      caught = error as never;
    }
    expect(caught).toMatchObject({ code: 'INVALID_ARGUMENT', details: { option: 'workerUrl', workerUrl: workerUrl.href, got: describeValue(workerUrl.href) } });
    expect(caught!.message).toMatch(/^workerUrl must be the worker script's file: URL, .*, got string ".*" \(it names something that is not a file: /);
    expect(() => createThreadDecoder({ workerUrl: 5 as unknown as URL })).toThrow(expect.objectContaining({ message: expect.stringMatching(/^workerUrl must be a URL .*, got 5$/), details: expect.objectContaining({ option: 'workerUrl', got: '5' }) }));
  });

  it.each([
    ['blobs read on the threads', false],
    ['a custom reader: payloads staged here', true],
  ] as const)('workers that die as they start: every tensor from the cache, decoded on the calling thread, named for it (%s)', { timeout: 30_000 }, async (_label, customReader) => {
    // Every tensor for the workers, also while they start.
    const decoder = createThreadDecoder({ threads: 2, workerUrl: brokenScript, inlineMaxValues: 0, startupInlineMaxValues: 0 });
    const reader = customReader ? createFileReader() : undefined;
    try {
      const load = loadModel(fixture.model, fixture.cache, { backend: decoder, ...(reader ? { reader } : {}) });
      for await (const tensor of load) expect(sameBytes(tensor.data, fixture.raw.get(tensor.name)!), tensor.name).toBe(true);
      expect(load.totals.byReason).toMatchObject({ cached: 4, 'cache-failed': 0 });
      expect(load.totals.backends).toEqual([expect.stringMatching(/^threads:2 \(decode threads failed to start, the calling thread decodes: .*broken worker script/)]);
      // Later loads as well, and loadTensor.
      const one = await loadTensor({ model: fixture.model, name: 'b.weight' }, { cache: fixture.cache, backend: decoder });
      expect(one.source).toBe('cache');
      expect(sameBytes(one.data, fixture.raw.get('b.weight')!)).toBe(true);
      await expect(decoder.warmUp()).rejects.toMatchObject({ code: 'DECODE_FAILED', message: expect.stringContaining('broken worker script') });
    } finally {
      await decoder.close();
      await reader?.close();
    }
  });
});

describe('totals.backends', () => {
  it('lists only backends that decoded: a tensor served raw after a failed decode names none', async () => {
    const backend = {
      name: 'always-fails',
      decode: () => Promise.reject(new Error('no decode today')),
    };
    const load = loadModel(fixture.model, fixture.cache, { backend });
    for await (const tensor of load) expect(sameBytes(tensor.data, fixture.raw.get(tensor.name)!), tensor.name).toBe(true);
    expect(load.totals.byReason['cache-failed']).toBe(4);
    expect(load.totals.backends).toEqual([]);
    for (const report of load.reports) {
      expect(report.backend).toBeUndefined();
      expect(report.error?.message).toContain('decode backend always-fails failed');
    }
  });
});
