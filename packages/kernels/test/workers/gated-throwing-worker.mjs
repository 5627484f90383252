// A decode worker that throws as it loads once the test lets it: the n-th worker started (claimed by
// creating `claim-<n>` in $SPLITZIP_TEST_GATE_DIR) waits for `die-<n>` there, so a test decides the
// order and the moment of each death at start-up.
import { existsSync, openSync, closeSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.env.SPLITZIP_TEST_GATE_DIR;
let n = 0;
for (;; n++) {
  try {
    closeSync(openSync(join(dir, `claim-${n}`), 'wx'));
    break;
  } catch {
    // taken by an earlier worker
  }
}
const pause = new Int32Array(new SharedArrayBuffer(4));
while (!existsSync(join(dir, `die-${n}`))) Atomics.wait(pause, 0, 0, 5);
throw new Error(`gated worker ${n} threw on load`);
