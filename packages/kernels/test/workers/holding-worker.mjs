// The real decode worker, held at two points until the test lets it go (files in
// $SPLITZIP_TEST_HOLD_DIR), as a descheduled thread would be:
// - its first range claim (Atomics.add on a job control's claimed slot): writes `at-claim`, then waits
//   for `release-claim` before the range is decoded;
// - its first checksum claim (compareExchange on the verify slot): writes `at-verify`, waits for
//   `release-verify`; `judged` is written if it then hashes the payload (runVerify stores the verdict).
import { closeSync, existsSync, openSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.env.SPLITZIP_TEST_HOLD_DIR;
const pause = new Int32Array(new SharedArrayBuffer(4));
const held = new Set();
const touch = (name) => closeSync(openSync(join(dir, name), 'w'));
const holdOnce = (point) => {
  if (held.has(point)) return;
  held.add(point);
  touch(`at-${point}`);
  while (!existsSync(join(dir, `release-${point}`))) Atomics.wait(pause, 0, 0, 5);
};
// A job's control: 4 slots (claimed, done, failed, verify) and one per task.
const isControl = (array) => array instanceof Int32Array && array.length > 4;
const add = Atomics.add.bind(Atomics);
const compareExchange = Atomics.compareExchange.bind(Atomics);
const store = Atomics.store.bind(Atomics);
Atomics.add = (array, index, value) => {
  const k = add(array, index, value);
  if (isControl(array) && index === 0 && value === 1) holdOnce('claim');
  return k;
};
Atomics.compareExchange = (array, index, expected, value) => {
  if (isControl(array) && index === 3) holdOnce('verify');
  return compareExchange(array, index, expected, value);
};
Atomics.store = (array, index, value) => {
  if (isControl(array) && index === 3 && value === 2) touch('judged');
  return store(array, index, value);
};
await import('../../dist/decode-worker.js');
