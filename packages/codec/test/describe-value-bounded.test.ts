// A wrong argument's description is written only as far as a message shows it (60 characters):
// JSON.stringify of the whole object before cutting read every value of a typed array inside it
// ({ name, data: Uint16Array(4M) } took ~2 s to describe, 100M values ~1 min or a RangeError).
// Asserted by what is read (counting getters and Proxy traps) and by what is shown, not by time.
import { describe, expect, it } from 'vitest';
import { countExponents, type SplitZipError } from '../src/index.js';

function refusal(run: () => unknown): SplitZipError {
  try {
    run();
  } catch (error) {
    return error as SplitZipError;
  }
  throw new Error('no error');
}

/** countExponents' refusal of `value` as its values, message and details.got. */
function describedAs(value: unknown): { message: string; got: unknown } {
  const error = refusal(() => countExponents(value as never));
  expect(error.code).toBe('INVALID_ARGUMENT');
  return { message: error.message, got: error.details?.got };
}

describe('an object holding large values is described without reading them', () => {
  it('a 50M-value typed array inside an object is shown by its tag and length (its JSON is past the longest string: the object was shown as [object Object])', () => {
    const { message, got } = describedAs({ name: 'w', data: new Uint16Array(50_000_000) });
    expect(got).toBe('object {"name":"w","data":Uint16Array(length 50000000)}');
    expect(message).toContain('got object {"name":"w","data":Uint16Array(length 50000000)}');
  }, 120_000);

  it('a long array inside an object (a Proxy counting item reads) is shown by its tag and length, no item read', () => {
    let itemReads = 0;
    const items = new Proxy(new Array<number>(1_000_000).fill(1), {
      get(target, key, receiver) {
        if (typeof key === 'string' && /^\d+$/.test(key)) itemReads += 1;
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    expect(describedAs({ items }).got).toBe('object {"items":Array(length 1000000)}');
    expect(itemReads).toBe(0);
  });

  it('an endlessly deep object (each level made by a counting getter) is written 60 characters deep, then cut', () => {
    let levelReads = 0;
    const level = (): object => ({
      get next(): object {
        levelReads += 1;
        return level();
      },
    });
    const { got } = describedAs(level());
    expect(got).toBe(`object ${'{"next":'.repeat(8).slice(0, 57)}...`);
    expect(levelReads).toBeLessThanOrEqual(8);
  });

  it('an object of 20,000 properties (a Proxy counting reads) has at most the shown ones read', () => {
    let propertyReads = 0;
    const target = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`p${i}`, i]));
    const wide = new Proxy(target, {
      get(object, key, receiver) {
        if (typeof key === 'string' && key.startsWith('p')) propertyReads += 1;
        return Reflect.get(object, key, receiver) as unknown;
      },
    });
    const { got } = describedAs(wide);
    expect(got).toMatch(/^object \{"p0":0,"p1":1,"p2":2,.*\.\.\.$/);
    expect((got as string).length).toBe('object '.length + 60);
    expect(propertyReads).toBeLessThanOrEqual(10);
  });

  it("a long string, an ArrayBuffer, a DataView and a Node Buffer inside an object are not copied whole (a Buffer's toJSON lists every byte)", () => {
    expect(describedAs({ text: 'x'.repeat(10_000_000) }).got).toBe(`object {"text":"${'x'.repeat(57 - 9)}...`);
    expect(describedAs({ b: Buffer.alloc(1 << 20) }).got).toBe('object {"b":Uint8Array(length 1048576)}');
    expect(describedAs({ v: new DataView(new ArrayBuffer(1 << 20)), s: new SharedArrayBuffer(4) }).got).toBe('object {"v":DataView(byteLength 1048576),"s":SharedArrayBuffer(b...');
    expect(describedAs({ buffer: new ArrayBuffer(8), view: new DataView(new ArrayBuffer(4)) }).got).toBe('object {"buffer":ArrayBuffer(byteLength 8),"view":DataView(byteL...');
  });

  it('short objects read as JSON as before: toJSON applied, undefined and functions left out of objects, null in arrays; a cycle by its tag', () => {
    expect(describedAs({ a: 1, when: new Date(0) }).got).toBe('object {"a":1,"when":"1970-01-01T00:00:00.000Z"}');
    expect(describedAs({ x: [1, undefined, [3, { y: undefined, f: () => 1 }]], n: Number.NaN }).got).toBe('object {"x":[1,null,[3,{}]],"n":null}');
    expect(describedAs({ verify: false }).got).toBe('object {"verify":false}');
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    expect(describedAs(cyclic).got).toBe('object [object Object]');
    expect(describedAs({ get bad(): never { throw new Error('getter') } }).got).toBe('object [object Object]');
  });
});

describe('ordinary values read as JSON.stringify reads them', () => {
  it('boxed primitives are their primitive (new Number(5) is 5), at the top and inside an object', () => {
    expect(describedAs({ n: new Number(5), b: new Boolean(false), s: new String('ab') }).got).toBe('object {"n":5,"b":false,"s":"ab"}');
    expect(describedAs(new Number(3)).got).toBe('object 3');
    expect(describedAs(new String('ab')).got).toBe('object "ab"');
  });

  it('a cut never splits a surrogate pair (half an emoji)', () => {
    for (let pad = 40; pad < 60; pad++) {
      const { got } = describedAs({ s: `${'x'.repeat(pad)}${'\u{1F600}'.repeat(10)}` });
      const text = String(got);
      expect(text.endsWith('...')).toBe(true);
      const last = text.charCodeAt(text.length - 4);
      // The character before "..." is no lone high surrogate.
      expect(last >= 0xd800 && last <= 0xdbff).toBe(false);
    }
  });
});
