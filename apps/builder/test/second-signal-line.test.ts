// The line a second Ctrl-C prints names `splitzip gc <cache>` to copy: a cache path with a space is
// quoted (it read `splitzip gc /tmp/my cache`, two arguments once pasted).
import { describe, expect, it } from 'vitest';
import { describeSecondSignal } from '../src/run-cli.js';

describe('describeSecondSignal', () => {
  it("quotes the cache path in build's and gc's commands to copy", () => {
    expect(describeSecondSignal({ command: 'build', json: false, cache: '/tmp/my cache' }, 'SIGINT')).toBe(
      "stopped at once by a second SIGINT; committed entries are kept, and `splitzip gc '/tmp/my cache'` removes any temp files left behind",
    );
    const gc = describeSecondSignal({ command: 'gc', json: false, cache: "/tmp/it's here" }, 'SIGINT');
    expect(gc).toContain("the next `splitzip gc '/tmp/it'\\''s here'` removes them (`splitzip verify '/tmp/it'\\''s here'` notes them)");
  });

  it('leaves a plain path and the placeholder as they are', () => {
    expect(describeSecondSignal({ command: 'build', json: false, cache: '/tmp/c-1' }, 'SIGTERM')).toContain('`splitzip gc /tmp/c-1` removes');
    expect(describeSecondSignal({ command: 'build', json: false }, 'SIGINT')).toContain('`splitzip gc <cache>` removes');
  });
});
