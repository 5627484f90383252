// The built source maps point at the sources instead of embedding them: embedded (sourcesContent),
// they were 60% of the tarball, once in the ESM maps and again in the CommonJS ones. So each map's
// `sources` must name a file the tarball ships (src/ is in package.json `files`), or a debugger
// shows nothing. The file list is npm's own (`npm pack --dry-run`, no scripts, no network) over the
// built dist/.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The paths `npm pack` would put in the tarball, relative to the package root. */
function listPackedFiles(): string[] {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const out = execFileSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: PACKAGE_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  return (JSON.parse(out) as { files: { path: string }[] }[])[0]!.files.map((file) => file.path);
}

describe('the shipped source maps', () => {
  const packed = listPackedFiles();
  const maps = packed.filter((path) => path.endsWith('.map'));

  it('are shipped, one per built script', () => {
    const scripts = packed.filter((path) => /^dist\/.*\.(c?js)$/.test(path));
    expect(scripts.length).toBeGreaterThan(0);
    expect(maps.sort()).toEqual(scripts.map((path) => `${path}.map`).sort());
  });

  for (const map of maps) {
    it(`${map}: no sourcesContent, and every source is a shipped file`, () => {
      const parsed = JSON.parse(readFileSync(`${PACKAGE_ROOT}/${map}`, 'utf8')) as { sources: string[]; sourcesContent?: unknown; sourceRoot?: string };
      expect(parsed.sourcesContent).toBeUndefined();
      expect(parsed.sourceRoot ?? '').toBe('');
      expect(parsed.sources.length).toBeGreaterThan(0);
      const missing = parsed.sources.map((source) => posix.join(posix.dirname(map), source)).filter((path) => !packed.includes(path));
      expect(missing).toEqual([]);
    });
  }
});
