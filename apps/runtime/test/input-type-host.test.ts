// A loader run as `node --input-type=module -e …`: worker threads inherit their parent's options,
// and --input-type made every decode thread fail to start.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

describe('a host process started with --input-type', () => {
  it('starts its decode threads (they failed: DECODE_FAILED, and loads fell back to one thread)', { timeout: 30_000 }, () => {
    const script = `
      import { createThreadDecoder } from ${JSON.stringify(fileURLToPath(new URL('../dist/index.js', import.meta.url)))};
      const decoder = createThreadDecoder({ threads: 2 });
      try { await decoder.warmUp(); console.log('threads started'); }
      catch (error) { console.log(error.code, error.message); }
      await decoder.close();`;
    const result = spawnSync(process.execPath, ['--max-old-space-size=512', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect(result.stdout.trim()).toBe('threads started');
    expect(result.status).toBe(0);
  });
});
