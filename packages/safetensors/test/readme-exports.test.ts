import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import * as api from '../src/index.js';

describe('README', () => {
  it('documents every export of the main entry, and MAX_QUOTED_CHARS is one', async () => {
    const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8');
    const undocumented = Object.keys(api).filter((name) => !readme.includes(`\`${name}`) && !readme.includes(`${name}(`));
    expect(undocumented).toEqual([]);
    expect(api.MAX_QUOTED_CHARS).toBe(120);
    // The writers' properties and options.
    for (const name of ['writtenDataBytes', 'totalBytes', 'indexMetadata', 'shardNamePrefix', 'indexFileName']) expect(readme).toContain(`\`${name}\``);
  });
});
