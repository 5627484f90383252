import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const srcDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'src');

/** Every module reachable from `entry` through relative imports. */
async function reachable(entry: string, seen = new Set<string>()): Promise<Set<string>> {
  if (seen.has(entry)) return seen;
  seen.add(entry);
  const text = await readFile(join(srcDir, entry), 'utf8');
  for (const match of text.matchAll(/from '\.\/([\w-]+)\.js'/g)) await reachable(`${match[1]}.ts`, seen);
  return seen;
}

describe('the ./header entry stays browser-safe', () => {
  it('imports nothing from Node and uses no Node globals', async () => {
    const modules = await reachable('header.ts');
    expect(modules.has('parse-safetensors-header.ts')).toBe(true);
    for (const module of modules) {
      const text = await readFile(join(srcDir, module), 'utf8');
      expect(text, module).not.toMatch(/from 'node:|require\(|\bBuffer\b|\bprocess\./);
    }
  });
});
