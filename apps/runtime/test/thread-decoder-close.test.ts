// A thread decoder closed while its workers still load their modules: Node leaks the descriptors of
// the module files a worker terminated mid-load had open (found by a probe: ~1 fd a cycle for a
// decoder closed 30 ms after it started, for good). close() lets a starting worker finish first.
// Run in a plain Node process on the built package: under the test runner the workers' start-up
// takes another time, and the window was missed.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const DIST = fileURLToPath(new URL('../dist/index.js', import.meta.url));

const SCRIPT = `
import { readdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
const { createThreadDecoder } = await import(process.argv[1]);
const open = () => readdirSync('/proc/self/fd').length;
const before = open();
for (let cycle = 0; cycle < 40; cycle++) {
  const decoder = createThreadDecoder({ threads: 2 });
  decoder.warmUp().catch(() => undefined);
  await sleep(20 + (cycle % 3) * 10);
  await decoder.close();
}
await sleep(200);
console.log(JSON.stringify({ before, after: open() }));
`;

it.runIf(process.platform === 'linux')('closing a decoder whose workers are starting leaves no descriptor open (40 cycles, closed 20-40 ms after start)', () => {
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', SCRIPT, DIST], { encoding: 'utf8', timeout: 120_000 });
  const { before, after } = JSON.parse(out.trim().split('\n').at(-1)!) as { before: number; after: number };
  // A descriptor or two of Node's own may come and go; the leak was about one a cycle.
  expect(after).toBeLessThanOrEqual(before + 2);
}, 150_000);

const CLOSE_WHILE_STARTING = `
const { createThreadDecoder } = await import(process.argv[1]);
const decoder = createThreadDecoder({ threads: 2 });
// Between inlineMaxValues and startupInlineMaxValues: starts the (unref'd) workers, decodes nothing.
decoder.decodeToNew(new Uint8Array(16), { elementCount: 3 << 20, shape: [3 << 20], dtype: 'BF16' });
await decoder.close();
console.log('closed');
`;

it('close() settles in a process with nothing else to do while its workers start (they are unreferenced; close waits for them)', () => {
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', CLOSE_WHILE_STARTING, DIST], { encoding: 'utf8', timeout: 60_000 });
  expect(out.trim()).toBe('closed');
});
