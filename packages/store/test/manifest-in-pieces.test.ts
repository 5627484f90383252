// parseManifest reads a manifest's entries a piece at a time (each entry's text parsed on its own,
// so its tree dies young) and leaves anything odd to the whole-tree parse, which reports it. The
// pieces must give what the tree gives, or nothing: mutated manifests are read both ways here.
import { signManifestText } from '@splitzip/test-support/manifest';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { openCacheStore } from '../src/index.js';
import { parseManifest, parseManifestInPieces, parseManifestTree, serializeManifest, type ParsedManifest } from '../src/manifest-format.js';
import type { CacheEntry } from '../src/types.js';
import { withSliceKeys } from '../src/validate-entry.js';
import { createRng, makeCache, removeTempDirs } from './helpers.js';

afterAll(removeTempDirs);
afterEach(() => vi.restoreAllMocks());

const SHARD = 'model-00001-of-00002.safetensors';
const STAMP = '240:1733400000000000001:1733400000000000001:77';

/** A manifest's text of `count` entries (bound to slices with stamps, one to two), without its checksum member. */
async function manifestBody(count: number): Promise<{ body: string; entries: CacheEntry[] }> {
  const { root } = await makeCache(count);
  const store = await openCacheStore(root);
  const read = [...store.entries()].sort((a, b) => a.qualname.localeCompare(b.qualname));
  await store.close();
  const entries = read.map((entry, i) =>
    withSliceKeys(entry, i === 1 ? [[SHARD, 240 * i, 240, [STAMP]], ['other.safetensors', 0, 240]] : [[SHARD, 240 * i, 240, [STAMP]]]),
  );
  const text = Buffer.from(serializeManifest(entries, { generation: 3, chunkSize: 64, coverageMin: 0.99 })).toString('utf8');
  return { body: text.replace(/,"body_crc32":"[0-9a-f]{8}"}\s*$/, '}'), entries };
}

type Outcome = { ok: unknown } | { error: Record<string, unknown> };

function outcomeOf(parse: () => ParsedManifest): Outcome {
  try {
    const parsed = parse();
    return {
      ok: {
        header: [parsed.generation, parsed.chunkSize, parsed.coverageMin],
        entries: [...parsed.state.entries.values()],
        slices: parsed.state.sliceOwners.size,
      },
    };
  } catch (error) {
    const e = error as Error & { code?: string; entry?: string; details?: unknown };
    return { error: { code: e.code, message: e.message, entry: e.entry, details: e.details } };
  }
}

/** One random edit of a manifest's text: white space, a repeated member or entry, an escaped key, damage. */
function mutate(text: string, rng: () => number, entryKeys: string[]): string {
  const at = (n: number) => Math.floor(rng() * n);
  const pos = at(text.length);
  const key = entryKeys[at(entryKeys.length)]!;
  switch (at(14)) {
    case 0:
    case 1:
    case 12:
    case 13: {
      // White space after a brace, bracket, comma or colon (mostly outside strings).
      const after = text.slice(pos).search(/[{}[\],:]/);
      const cut = after < 0 ? text.length : pos + after + 1;
      return text.slice(0, cut) + [' ', '\n', '\t', '\r\n  '][at(4)] + text.slice(cut);
    }
    case 2:
      return text.slice(0, pos) + text.slice(pos + 1);
    case 3:
      return text.slice(0, pos) + '{}[],:"\\ 0a-\u0001'[at(14)] + text.slice(pos + 1);
    case 4:
      // A member repeated: at the top, in an entry, in its meta.
      return [
        () => text.replace('{', '{"format":2,'),
        () => text.replace(`"${key}":{`, `"${key}":{"dtype":"BF16",`),
        () => text.replace(`"${key}":{`, `"${key}":{"shape":[1],`),
        () => text.replace('"meta":{', '"meta":{"checksum":1,'),
        () => text.replace(/}\s*$/, ',"entries":{}}'),
      ][at(5)]!();
    case 5: {
      // An entry given twice, or an escape in an entry's key (the same key, or another).
      const start = text.indexOf(`"${key}":{`);
      const end = text.indexOf(`},"`, text.indexOf('"sha256"', start)) + 1;
      if (at(2) === 0) return `${text.slice(0, end)},${text.slice(start, end)}${text.slice(end)}`;
      return text.replace(`"${key}"`, `"\\u00${key.charCodeAt(0).toString(16)}${key.slice(1)}"`);
    }
    case 6:
      return text.replace('"entries"', ['"entr\\u0069es"', '"entries" ', '"Entries"'][at(3)]!);
    case 7:
      // Members in another order, and one the reader does not know.
      return text.replace('"format":2,', '').replace(/}\s*$/, ',"format":2}').replace('{', ['{"x":{"a":[{"b":1,"b":2}]},', '{"x":null,', '{"__proto__":{},'][at(3)]!);
    case 8:
      return text + ['', ' ', '\n', 'x', ',', '}', ' {}'][at(7)]!;
    case 9:
      return text.replace(/"generation":\d+/, ['"generation":3.0', '"generation": 3 ', '"generation":"3"', '"generation":-0'][at(4)]!);
    case 10:
      // A slice bound to two entries, a shape of another size.
      return at(2) === 0 ? text.replace(`"other.safetensors",0,`, `"${SHARD}",0,`) : text.replace('"shape":[40,3]', '"shape":[3,40]');
    default:
      return text.replace(`"${key}"`, `"${key.slice(0, 39)}"`);
  }
}

describe('parseManifest in pieces', () => {
  it('never runs JSON.parse on the whole text of a valid manifest (its entries are parsed one at a time)', async () => {
    const { body, entries } = await manifestBody(6);
    const text = signManifestText(body);
    const spy = vi.spyOn(JSON, 'parse');
    const parsed = parseManifest(new TextEncoder().encode(text), 'manifest.json');
    const longest = Math.max(...spy.mock.calls.map(([piece]) => String(piece).length));
    spy.mockRestore();
    expect([...parsed.state.entries.values()]).toEqual(entries);
    expect(longest).toBeLessThan(text.length / 4);
    expect(outcomeOf(() => parsed)).toEqual(outcomeOf(() => parseManifestTree(text, new TextEncoder().encode(text), 'manifest.json')));
  });

  it('gives what the whole-tree parse gives, or leaves the manifest to it; parseManifest reports as it does (1,500 mutants)', async () => {
    const { body, entries } = await manifestBody(5);
    const keys = entries.map((entry) => entry.key);
    const rng = createRng(41);
    const tally = { pieces: 0, tree: 0, refused: 0 };
    for (let n = 0; n < 1500; n++) {
      let text = body;
      for (let k = 1 + Math.floor(rng() * 3); k > 0; k--) text = mutate(text, rng, keys);
      // Half of them signed: the checksum then holds, and the checks after it are reached.
      if (rng() < 0.5 && text.trimEnd().endsWith('}')) text = signManifestText(text);
      const bytes = new TextEncoder().encode(text);
      const tree = outcomeOf(() => parseManifestTree(text, bytes, 'manifest.json'));
      const pieces = parseManifestInPieces(text, bytes, 'manifest.json');
      if (pieces !== undefined) {
        expect(outcomeOf(() => pieces), text).toEqual(tree);
        tally.pieces++;
      } else if ('ok' in tree) {
        tally.tree++;
      } else {
        tally.refused++;
      }
      expect(outcomeOf(() => parseManifest(bytes, 'manifest.json')), text).toEqual(tree);
    }
    // Enough of each: valid manifests read in pieces, valid ones left to the tree (an escaped key,
    // a repeated member), and refusals.
    expect(tally.pieces).toBeGreaterThan(300);
    expect(tally.tree).toBeGreaterThan(20);
    expect(tally.refused).toBeGreaterThan(300);
  });
});
