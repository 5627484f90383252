import { SplitZipError } from '@splitzip/codec';
import { argumentTypeError, checkReadableView, isUint16Array } from '@splitzip/codec/internal';

/** The caller's output array (long enough) or a new one (over an ordinary ArrayBuffer); same rules and errors as the codec's decode. */
export function checkOutput(out: undefined, count: number): Uint16Array<ArrayBuffer>;
export function checkOutput<TBuffer extends ArrayBufferLike>(out: Uint16Array<TBuffer>, count: number): Uint16Array<TBuffer>;
/** Either: `TBuffer` is then the caller's own (a `toArray<TBuffer = ArrayBuffer>(out?)`), whose default names the new array's. */
export function checkOutput<TBuffer extends ArrayBufferLike>(out: Uint16Array<TBuffer> | undefined, count: number): Uint16Array<TBuffer>;
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
