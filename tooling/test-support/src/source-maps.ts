// A package's shipped source maps name their sources instead of embedding them (sourcesContent was
// most of each tarball, once per format), and every source they name ships (package.json `files`
// has src/), or a debugger shows nothing. The file list is npm's own (`npm pack --dry-run`, no
// scripts, no network) over the built dist/.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { posix } from 'node:path';
import { fileURLToPath } from 'node:url';

/** What checkShippedSourceMaps found; every list empty, and maps one per script, is a pass. */
export interface ShippedSourceMaps {
  /** `dist/….map` the tarball holds, sorted. */
  maps: string[];
  /** `dist/….js.map` / `.cjs.map` one per shipped script, sorted: what `maps` should be. */
  expectedMaps: string[];
  /** Maps that embed their sources. */
  withSourcesContent: string[];
  /** `map: source` for each named source the tarball lacks (resolved from the map's directory). */
  missingSources: string[];
}

/** The paths `npm pack` would put in the tarball of the package at `packageRoot`, relative to it. */
export function listPackedFiles(packageRoot: URL): string[] {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const out = execFileSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: fileURLToPath(packageRoot), encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  return (JSON.parse(out) as { files: { path: string }[] }[])[0]!.files.map((file) => file.path);
}

export function checkShippedSourceMaps(packageRoot: URL): ShippedSourceMaps {
  const packed = listPackedFiles(packageRoot);
  const shipped = new Set(packed);
  const maps = packed.filter((path) => path.endsWith('.map')).sort();
  const expectedMaps = packed.filter((path) => /^dist\/.*\.c?js$/.test(path)).map((path) => `${path}.map`).sort();
  const withSourcesContent: string[] = [];
  const missingSources: string[] = [];
  for (const map of maps) {
    const parsed = JSON.parse(readFileSync(new URL(map, packageRoot), 'utf8')) as { sources: string[]; sourcesContent?: unknown; sourceRoot?: string };
    if (parsed.sourcesContent !== undefined) withSourcesContent.push(map);
    for (const source of parsed.sources) {
      const path = posix.join(posix.dirname(map), parsed.sourceRoot ?? '', source);
      if (!shipped.has(path)) missingSources.push(`${map}: ${source}`);
    }
  }
  return { maps, expectedMaps, withSourcesContent, missingSources };
}
