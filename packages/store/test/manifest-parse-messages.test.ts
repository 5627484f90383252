// A manifest that decodes as UTF-8 but does not parse (cut off by a full disk or a stopped copy,
// or empty) says it is not valid JSON: "not UTF-8 JSON" sent a user looking for an encoding
// problem in a file that had none. Bytes that are not UTF-8 say that.
import { describe, expect, it } from 'vitest';
import { parseManifest } from '../src/manifest-format.js';

const encode = (text: string) => new TextEncoder().encode(text);

describe('MANIFEST_INVALID says which: JSON or UTF-8', () => {
  it.each([
    ['cut off', encode('{"format_version": 3, "entries": {"ab')],
    ['empty', new Uint8Array(0)],
  ])('%s: not valid JSON', (_label, bytes) => {
    expect(() => parseManifest(bytes, '/c/manifest.json')).toThrow(
      expect.objectContaining({ code: 'MANIFEST_INVALID', message: expect.stringMatching(/manifest is not valid JSON: /) }),
    );
  });

  it('bytes that are not UTF-8: not valid UTF-8', () => {
    expect(() => parseManifest(new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]), '/c/manifest.json')).toThrow(
      expect.objectContaining({ code: 'MANIFEST_INVALID', message: expect.stringMatching(/manifest is not valid UTF-8: /) }),
    );
  });
});
