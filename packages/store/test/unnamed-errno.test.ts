// Node 20's libuv has no name for some errnos: a full quota reads "Unknown system error -122", and
// the store's IO_ERROR said "[Unknown system error -122]" for a journal append or a directory sync.
import { constants } from 'node:os';
import { expect, it } from 'vitest';
import { errnoCode, toIoError } from '../src/errors.js';

it.runIf(constants.errno.EDQUOT !== undefined)('an errno Node cannot name gets its platform name (EDQUOT), in the code and the message', () => {
  const unnamed = `Unknown system error -${constants.errno.EDQUOT!}`; // what Node 20 says on Linux (122)
  const quota = Object.assign(new Error(`${unnamed}: ${unnamed}, write`), { code: unnamed, errno: -constants.errno.EDQUOT! });
  expect(errnoCode(quota)).toBe('EDQUOT');
  const wrapped = toIoError(quota, 'cannot append to the journal', { path: '/c/journal.2' });
  // A full quota is NO_SPACE, as a full disk is (an unnamed errno was IO_ERROR before it had a name).
  expect(wrapped).toMatchObject({ code: 'NO_SPACE', message: expect.stringContaining('cannot append to the journal: the disk quota is full [EDQUOT]'), details: { errno: 'EDQUOT' } });
  expect(errnoCode(Object.assign(new Error('x'), { code: 'ENOSPC' }))).toBe('ENOSPC');
  expect(errnoCode(Object.assign(new Error('x'), { code: 'Unknown system error -99999' }))).toBe('Unknown system error -99999');
});
