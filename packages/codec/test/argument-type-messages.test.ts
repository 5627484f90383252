// Wrong argument types at every public entry: INVALID_ARGUMENT whose message shows the caller's
// value with its type (the README's promise), in `details.got` too. Before, "out must be a
// Uint16Array" with empty details left a caller of decode(p, { verify: false }) guessing.
import { describe, expect, it } from 'vitest';
import {
  calibrateCodebook,
  calibrateFromHistogram,
  computeSegmentSpans,
  countExponents,
  createCodebook,
  createCodecArena,
  createXxh32Stream,
  decode,
  decodeChunks,
  decodeRange,
  decodeSegments,
  encode,
  readPayloadMeta,
  validatePayloadStructure,
  verifySegmentDigests,
  xxh32,
  type SplitZipError,
} from '../src/index.js';

const values = new Uint16Array([0x3f80, 0x4000, 0xc040, 0x0000]);
const codebook = createCodebook([127, 128]);
const payload = encode(values, codebook);
const meta = readPayloadMeta(payload);

function refusal(run: () => unknown): SplitZipError {
  try {
    run();
  } catch (error) {
    return error as SplitZipError;
  }
  throw new Error('no error');
}

const CASES: [string, () => unknown, string][] = [
  ['decode payload', () => decode([1, 2, 3] as never), 'payload must be a Uint8Array, got object [object Array] of length 3'],
  ['decode out', () => decode(payload, new Uint8Array(8) as never), 'out must be a Uint16Array, got object [object Uint8Array] of length 8'],
  ['decodeRange out', () => decodeRange(payload, 0, 2, 'buffer' as never), 'out must be a Uint16Array, got string "buffer"'],
  ['decodeChunks out', () => decodeChunks(payload, meta, 0, 1, null as never), 'out must be a Uint16Array (required), got null'],
  ['decodeChunks meta', () => decodeChunks(payload, 5 as never, 0, 1, new Uint16Array(4)), 'meta must be a PayloadMeta from readPayloadMeta, got 5'],
  ['readPayloadMeta', () => readPayloadMeta('SZBF' as never), 'payload must be a Uint8Array, got string "SZBF"'],
  ['encode values', () => encode([1, 2] as never, codebook), 'values must be a Uint16Array of BF16 bit patterns, got object [object Array] of length 2'],
  ['encode out', () => encode(values, codebook, { out: new Uint16Array(4096) as never }), 'options.out must be a Uint8Array, got object [object Uint16Array] of length 4096'],
  ['encode options', () => encode(values, codebook, 4096 as never), 'options must be an object (or undefined), got 4096'],
  ['encode escapeCount', () => encode(values, codebook, { escapeCount: '0' as never }), 'escapeCount must be an integer in 0..4 (values.length), got string "0"'],
  ['encode codebook', () => encode(values, 'top16' as never), 'codebook must be an object with an exponents array, got string "top16"'],
  ['calibrateCodebook', () => calibrateCodebook(new Float32Array(2) as never), 'values must be a Uint16Array of BF16 bit patterns, got object [object Float32Array] of length 2'],
  ['calibrateFromHistogram', () => calibrateFromHistogram(new Uint32Array(255)), 'histogram must be a Uint32Array of length 256, got object [object Uint32Array] of length 255'],
  ['countExponents histogram', () => countExponents(values, [0] as never), 'histogram must be a Uint32Array of length 256, got object [object Array] of length 1'],
  ['verifySegmentDigests digests', () => verifySegmentDigests(payload, meta, 7n as never), 'digests must be a Uint32Array, got bigint 7n'],
  ['xxh32', () => xxh32('abc' as never), 'bytes must be a Uint8Array, got string "abc"'],
  ['xxh32 stream', () => createXxh32Stream().update(undefined as never), 'bytes must be a Uint8Array, got undefined'],
  ['validatePayloadStructure streams', () => validatePayloadStructure(payload, meta, {} as never), 'streams must be readEscapeStreams(payload, meta), got object {}'],
  ['computeSegmentSpans layout', () => computeSegmentSpans('layout' as never, 0), 'layout must be a PayloadLayout (computePayloadLayout), got string "layout"'],
  ['arena release', () => createCodecArena(4096).release(new Uint8Array(4)), 'view must be a view of this arena (from allocate or allocateValues), got object [object Uint8Array] of length 4'],
  // The arena's number checks said what was wanted, not what came ("arena byteLength must be an integer in 0..n").
  ['arena byteLength', () => createCodecArena('1MB' as never), 'arena byteLength must be an integer in 0..4294574080, got string "1MB"'],
  ['arena byteLength negative', () => createCodecArena(-1), 'arena byteLength must be an integer in 0..4294574080, got -1'],
  ['arena threads', () => createCodecArena(4096, { threads: 1.5 }), 'arena threads must be an integer in 0..64, got 1.5'],
  ['arena allocate', () => createCodecArena(4096).allocate(-5), 'byteLength must be a non-negative integer, got -5'],
  ['arena allocate string', () => createCodecArena(4096).allocate('16' as never), 'byteLength must be a non-negative integer, got string "16"'],
  ['arena allocateValues', () => createCodecArena(4096).allocateValues(1.5), 'count must be an integer in 0..2147287040, got 1.5'],
  ['arena share index', () => createCodecArena(4096, { threads: 1 }).share(1), "share index must be an integer in 0..0 (the arena's threads), got 1"],
];

describe('wrong argument types show the value passed, with its type', () => {
  it.each(CASES)('%s', (_, run, expected) => {
    const error = refusal(run);
    expect(error.code === 'INVALID_ARGUMENT' || error.code === 'INVALID_CODEBOOK').toBe(true);
    expect(error.message).toContain(expected);
    expect(typeof error.details.got).toBe('string');
    expect(error.message).toContain(error.details.got as string);
  });

  it('decode(p, { verify: false }) says options look passed as out', () => {
    for (const run of [() => decode(payload, { verify: false } as never), () => decodeRange(payload, 0, 2, { verify: true } as never)]) {
      const error = refusal(run);
      expect(error.code).toBe('INVALID_ARGUMENT');
      expect(error.message).toContain('out must be a Uint16Array, got object {"verify":');
      expect(error.message).toContain('it looks like options were passed as out');
      expect(error.details).toMatchObject({ argument: 'out' });
    }
    // Each in its own call form: decodeRange's hint showed decode's, decode(payload, undefined, ...).
    expect(refusal(() => decode(payload, { verify: false } as never)).message).toContain('e.g. decode(payload, undefined, { verify: false })');
    const rangeHint = refusal(() => decodeRange(payload, 0, 2, { verify: false } as never)).message;
    expect(rangeHint).toContain('e.g. decodeRange(payload, start, count, undefined, { verify: false })');
    expect(rangeHint).not.toContain('decode(payload');
    // Not for an object that is no options object.
    expect(refusal(() => decode(payload, { length: 4 } as never)).message).not.toContain('looks like options');
  });

  it("decodeChunks' and decodeSegments' hints show their own forms, not decode's", () => {
    // decodeChunks takes no options: decode's or decodeSegments' where its required out goes.
    for (const options of [{ verify: false }, { digests: new Uint32Array(6) }]) {
      const error = refusal(() => decodeChunks(payload, meta, 0, 1, options as never));
      expect(error.message).toContain('out must be a Uint16Array (required), got object {');
      expect(error.message).toContain('(it looks like options were passed as out: decodeChunks takes no options (it judges no checksum: verify once up front), and out is required: decodeChunks(payload, meta, firstChunk, chunkCount, out))');
      expect(error.message).not.toContain('decode(payload');
      expect(error.details).toMatchObject({ argument: 'out' });
    }
    // decodeSegments: its { digests } after its required out.
    for (const options of [{ digests: new Uint32Array(6) }, { verify: false }]) {
      const error = refusal(() => decodeSegments(payload, meta, 0, 1, options as never));
      expect(error.message).toContain('out must be a Uint16Array (required), got object {');
      expect(error.message).toContain('(it looks like options were passed as out: options come after out, which is required, e.g. decodeSegments(payload, meta, firstSegment, endSegment, out, { digests }))');
      expect(error.message).not.toContain('decode(payload');
    }
    // Not for an object that is no options object, nor for a missing out.
    expect(refusal(() => decodeChunks(payload, meta, 0, 1, { length: 4 } as never)).message).not.toContain('looks like options');
    expect(refusal(() => decodeSegments(payload, meta, 0, 1, undefined as never)).message).not.toContain('looks like options');
  });
});
