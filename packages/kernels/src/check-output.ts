import { SplitZipError } from '@splitzip/codec';
import { argumentTypeError, checkReadableView, isUint16Array } from '@splitzip/codec/internal';

/** The caller's output array (long enough) or a new one; same rules and errors as the codec's decode. */
export function checkOutput(out: Uint16Array | undefined, count: number): Uint16Array {
  if (out === undefined) return new Uint16Array(count);
  checkOutputKind(out);
  checkReadableView(out, 'out');
  if (out.length < count) {
    throw new SplitZipError('OUTPUT_TOO_SMALL', `out holds ${out.length} values, ${count} needed`, {
      outLength: out.length,
      needed: count,
    });
  }
  return out;
}

/** The codec's first rule on a caller's `out`: a Uint16Array (of any realm), when one is given; its message shows what came. */
export function checkOutputKind(out: Uint16Array | undefined): void {
  if (out !== undefined && !isUint16Array(out)) throw argumentTypeError('out', 'a Uint16Array', out);
}
