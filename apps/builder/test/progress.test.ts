// The progress bar appears on a TTY only (run under `script`, which gives the child a pty), and
// never with --quiet or when the output is not a terminal.
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTempDir, gaussianBf16, writeSingleFileModel, type TempDir } from './helpers/models.js';
import { assertBuilt, CLI_PATH, runCli } from './helpers/run-cli.js';

let temp: TempDir;
let model: string;
beforeAll(async () => {
  assertBuilt();
  temp = await createTempDir();
  model = await writeSingleFileModel(
    join(temp.path, 'p.safetensors'),
    Array.from({ length: 12 }, (_, i) => gaussianBf16(`w${i}`, [512, 512], 50 + i)),
  );
});
afterAll(async () => temp?.cleanup());

const hasScript = spawnSync('script', ['--version']).status === 0;

function runOnTty(args: string[]): string {
  const command = [process.execPath, CLI_PATH, ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(' ');
  // -q: no banner; -e: child's exit code; -c: the command; the transcript goes to /dev/null.
  return execFileSync('script', ['-qec', command, '/dev/null'], { encoding: 'utf8', env: { ...process.env, COLUMNS: '120' } });
}

describe('progress bar', () => {
  it.skipIf(!hasScript)('draws bytes, rate and ETA on a TTY, and nothing with --quiet', () => {
    const shown = runOnTty(['build', model, '--out', join(temp.path, 'c1'), '--jobs', '1']);
    // Rate and ETA show once a second of progress is measured (progress-bar.test.ts): this build is shorter.
    expect(shown).toMatch(/\r\[[#.]{24}\]\s+\d+%\s+[\d.]+ (B|KiB|MiB) \/ [\d.]+ MiB\s+(\S+ \S+\/s|-)\s+ETA (\d\d:\d\d|--:--)/);
    expect(shown).toContain('\x1b[K');
    const quiet = runOnTty(['build', model, '--out', join(temp.path, 'c2'), '--quiet']);
    expect(quiet).not.toContain('ETA');
    expect(quiet).toContain('tensors 12: 12 encoded');
  });

  it('draws nothing when stderr is not a TTY', async () => {
    const result = await runCli(['build', model, '--out', join(temp.path, 'c3')]);
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    expect(result.stdout).not.toContain('\r');
  });
});
