// The README is what a user reads first: its Usage example must run as written (it used an
// undefined `bf16BitPatterns`), and it must say up front what the probe of the packed package
// tripped on: the TypeScript version the declarations need (only the Types paragraph, far below,
// said 5.7) and that decode returns `out` itself, not a trimmed view.
import { readFileSync } from 'node:fs';
import { transformSync } from 'esbuild';
import { describe, expect, it } from 'vitest';
import * as codec from '../src/index.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

function section(title: string): string {
  const start = readme.indexOf(`\n## ${title}\n`);
  expect(start).toBeGreaterThan(-1);
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end === -1 ? undefined : end);
}

/** The ```ts blocks of a piece of the README, in order. */
function blocksOf(text: string): string[] {
  return [...text.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]!);
}

describe('README', () => {
  it('Usage: the first example runs as written against the package', () => {
    const usage = section('Usage');
    const block = /```ts\n([\s\S]*?)```/.exec(usage)![1]!;
    const imported = /import \{([^}]*)\} from '@splitzip\/codec';/.exec(block)![1]!.split(',').map((name) => name.trim());
    for (const name of imported) expect(codec, name).toHaveProperty(name);
    const body = block.replace(/import \{[^}]*\} from '@splitzip\/codec';/, `const { ${imported.join(', ')} } = codec;`);
    const js = transformSync(body, { loader: 'ts', format: 'esm' }).code;
    expect(() => new Function('codec', js)(codec)).not.toThrow();
  });
  // The Usage example said "BF16 bytes from a file: new Uint16Array(buffer)": with Node's Buffer
  // that is one value per byte, wrong values that encode takes silently.
  it("Usage: the file snippet turns a Node Buffer's bytes into its BF16 values, at an odd byteOffset too", () => {
    const block = blocksOf(section('Usage')).find((code) => code.includes('readFileSync('));
    expect(block, 'a Usage snippet reading BF16 bytes from a file').toBeDefined();
    const expected = new Uint16Array([0x3f80, 0x4000, 0xbf80, 0x3c00, 0x7fc0]);
    const raw = Buffer.from(expected.buffer);
    const oddHost = Buffer.alloc(raw.length + 1);
    raw.copy(oddHost, 1);
    for (const file of [raw, Buffer.from(raw), oddHost.subarray(1)]) {
      const js = transformSync(`${block!}\nreturn values;`, { loader: 'ts' }).code;
      const values = new Function('readFileSync', js)(() => file) as Uint16Array;
      expect(values).toBeInstanceOf(Uint16Array);
      expect(Array.from(values)).toEqual(Array.from(expected));
    }
    for (const code of blocksOf(readme)) expect(code).not.toMatch(/new Uint16Array\(buffer\)/);
  });

  it('Usage: the HTTP Range snippet reads the header alone (readPayloadHeader), then a section', async () => {
    const block = blocksOf(section('Usage')).find((code) => code.includes('readPayloadHeader('));
    expect(block, 'a Usage snippet reading a payload by ranges').toBeDefined();
    const values = new Uint16Array(5000).map((_, i) => 0x3c00 + (i % 300));
    const payload = codec.encode(values, codec.calibrateCodebook(values).codebook);
    const asked: string[] = [];
    const fetch = async (_url: string, init: { headers: { Range: string } }) => {
      asked.push(init.headers.Range);
      const [from, last] = /^bytes=(\d+)-(\d+)$/.exec(init.headers.Range)!.slice(1).map(Number);
      return { arrayBuffer: async () => payload.slice(from, last! + 1).buffer };
    };
    const imported = /import \{([^}]*)\} from '@splitzip\/codec';/.exec(block!)![1]!;
    const body = block!.replace(/import \{[^}]*\} from '@splitzip\/codec';/, `const {${imported}} = codec;`);
    const js = transformSync(`async function run() {\n${body}\nreturn { header, escapeIndex };\n}`, { loader: 'ts' }).code;
    const run = new Function('codec', 'fetch', 'url', `${js}\nreturn run();`);
    const { header, escapeIndex } = (await run(codec, fetch, 'https://example.test/w.szbf')) as { header: codec.PayloadHeader; escapeIndex: Uint8Array };
    const meta = codec.readPayloadMeta(payload);
    expect(asked[0]).toBe('bytes=0-255');
    expect(header.totalBytes).toBe(payload.length);
    expect(header.layout).toEqual(meta.layout);
    expect(Array.from(escapeIndex)).toEqual(Array.from(payload.subarray(meta.layout.escapeIndex.offsetBytes, meta.layout.escapeIndex.offsetBytes + meta.layout.escapeIndex.byteLength)));
  });

  it('says before Usage that the types need TypeScript 5.7', () => {
    const intro = readme.slice(0, readme.indexOf('\n## Usage\n'));
    expect(intro).toMatch(/TypeScript ≥ 5\.7/);
    expect(intro).toContain('TS2315');
  });
  it('says decode returns out itself, values in its first elementCount elements, with out.subarray(0, n)', () => {
    const decodeRow = readme.split('\n').find((line) => line.startsWith('| `decode(payload, out?'))!;
    expect(decodeRow).toContain('Returns `out` itself');
    expect(decodeRow).toContain('out.subarray(0, n)');
    expect(section('Usage')).toContain('const tensor = slot.subarray(0, n);');
  });
});
