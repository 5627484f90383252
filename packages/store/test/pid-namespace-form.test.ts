// The store writes this process's pid namespace into every lock it takes, and reads a record whose
// namespace is not `pid:[<digits>]` as unparseable (a flipped bit). A link text of another form
// would then have made this writer's own lock unparseable to itself (every later commit waited out
// UNPARSEABLE_LOCK_STALE_MS): such a text is recorded as no namespace at all.
import type * as Fs from 'node:fs';
import { expect, it, vi } from 'vitest';

vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof Fs>();
  return { ...fs, readlinkSync: (path: string) => (path === '/proc/self/ns/pid' ? 'pid:[odd-form]' : fs.readlinkSync(path)) };
});

it('a pid namespace link text of another form than pid:[<digits>] is recorded as none', async () => {
  const { currentPidNamespace, describeThisProcess } = await import('../src/write-lock.js');
  expect(currentPidNamespace()).toBeNull();
  expect(describeThisProcess().pidNamespace).toBeNull();
});
