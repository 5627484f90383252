// The README documents every field the commands' --json output has (users parse them): each
// command's block there must name every field emitted, at every depth (objects and list items
// within), as `"field"`.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { openCacheStore } from '@splitzip/store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/run-cli.js';
import { createTempDir, escapeHeavyBf16, float32Tensor, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';

const README = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

/** The README's ```jsonc block whose first line is `// splitzip <command> --json…`. */
function readmeBlock(command: string): string {
  const blocks = [...README.matchAll(/```jsonc\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const block = blocks.find((b) => b.startsWith(`// splitzip ${command} --json`));
  if (block === undefined) throw new Error(`README has no \`\`\`jsonc block starting "// splitzip ${command} --json"`);
  return block;
}

/** Field paths of a document at every depth: the fields of each object, and of every object item of a list. */
function fieldsOf(document: Record<string, unknown>, prefix = ''): { path: string; name: string }[] {
  const fields: { path: string; name: string }[] = [];
  for (const [name, value] of Object.entries(document)) {
    const path = `${prefix}${name}`;
    fields.push({ path, name });
    const items = Array.isArray(value) ? value : [value];
    const seen = new Set<string>();
    for (const item of items) {
      if (typeof item !== 'object' || item === null || Array.isArray(item)) continue;
      for (const field of fieldsOf(item as Record<string, unknown>, `${path}.`)) {
        if (seen.has(field.path)) continue;
        seen.add(field.path);
        fields.push(field);
      }
    }
  }
  return fields;
}

async function runJson(argv: string[]): Promise<{ code: number; document: Record<string, unknown> }> {
  let out = '';
  const sink = (write: (text: string) => void) =>
    new Writable({
      write(chunk, _encoding, done) {
        write(String(chunk));
        done();
      },
    });
  const code = await runCli([...argv, '--json'], { io: { stdout: sink((text) => (out += text)), stderr: sink(() => {}) } });
  return { code, document: JSON.parse(out) as Record<string, unknown> };
}

let temp: TempDir;
let model: string;
let cacheDir: string;
beforeAll(async () => {
  temp = await createTempDir('splitzip-readme-json-');
  model = await writeSingleFileModel(join(temp.path, 'm.safetensors'), [gaussianBf16('a', [64, 64], 1), escapeHeavyBf16('b', [2048], 2), float32Tensor('c', [16], 3), gaussianBf16('d', [300], 4)]);
  cacheDir = join(temp.path, 'cache');
});
afterAll(async () => temp?.cleanup());

describe('the README lists every --json field', () => {
  it.each([
    ['build', () => ['build', model, '--out', cacheDir, '--jobs', '0', '--quiet']],
    ['verify', () => ['verify', cacheDir, '--model', model]],
    ['inspect', () => ['inspect', cacheDir, '--model', model]],
    ['stats', () => ['stats', model]],
    ['gc', () => ['gc', cacheDir, '--model', model, '--drop-unbound-entries']],
  ] as const)('of %s', async (command, argv) => {
    if (command !== 'build') await runJson(['build', model, '--out', cacheDir, '--jobs', '0', '--quiet']);
    const { code, document } = await runJson([...argv()]);
    expect(code).toBe(0);
    const block = readmeBlock(command);
    // inspect --model's bindings are gc --json's, documented once there.
    const bindings = command === 'inspect' ? readmeBlock('gc') : block;
    const missing = fieldsOf(document).filter(({ path, name }) => !(path.startsWith('bindings.') ? bindings : block).includes(`"${name}"`));
    expect(missing.map((f) => f.path)).toEqual([]);
  });

  it("of gc's s3:// drop fields (the store's reports stubbed on a directory cache: staleDropResolution, stopped, blobsMissing)", async () => {
    await runJson(['build', model, '--out', cacheDir, '--jobs', '0', '--quiet']);
    const probe = await openCacheStore(cacheDir);
    type Proto = { gc: (options?: unknown) => Promise<Record<string, unknown>>; dropUnboundEntries: (options?: { dryRun?: boolean }) => Promise<Record<string, unknown>> };
    const proto = Object.getPrototypeOf(probe) as Proto;
    await probe.close();
    const [gc, drop] = [proto.gc, proto.dropUnboundEntries];
    const resolution = { restored: ['entries/a'], blobsDeleted: ['blobs/b'], blobsMissing: ['entries/c'], intentsInvalid: ['dropping/d'], error: { code: 'S3_UNAVAILABLE', message: 'x' } };
    const s3Fields = { keptUnderDrop: 1, staleDropIntents: ['dropping/e'], staleDropResolution: resolution };
    proto.gc = async function (this: unknown, options?: unknown) {
      return { ...(await gc.call(this, options)), ...s3Fields };
    };
    proto.dropUnboundEntries = async function (this: unknown, options: { dryRun?: boolean } = {}) {
      const report = await drop.call(this, options);
      return options.dryRun === true ? report : { ...report, ...s3Fields, blobsMissing: ['blobs/f'], stopped: { reason: 'intent-old', leftToResolver: ['entries/g'] } };
    };
    try {
      const { code, document } = await runJson(['gc', cacheDir, '--drop-unbound-entries']);
      expect(code).toBe(0);
      const paths = fieldsOf(document).map((f) => f.path);
      expect(paths).toEqual(expect.arrayContaining(['staleDropResolution.intentsInvalid', 'unboundEntries.stopped.leftToResolver', 'unboundEntries.staleDropResolution.error.code']));
      const block = readmeBlock('gc');
      expect(fieldsOf(document).filter(({ name }) => !block.includes(`"${name}"`)).map((f) => f.path)).toEqual([]);
    } finally {
      proto.gc = gc;
      proto.dropUnboundEntries = drop;
    }
  });

  it('of an error exit', async () => {
    const { code, document } = await runJson(['verify', join(temp.path, 'no-such-cache')]);
    expect(code).toBe(1);
    const block = readmeBlock('<command>');
    expect(fieldsOf(document).map((f) => f.path)).toEqual(['error', 'error.code', 'error.message', 'error.path']);
    expect(fieldsOf(document).filter(({ name }) => !block.includes(`"${name}"`)).map((f) => f.path)).toEqual([]);
  });
});
