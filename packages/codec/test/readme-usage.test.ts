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
