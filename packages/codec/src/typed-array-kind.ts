import { SplitZipError } from './errors.js';

/**
 * Typed-array checks that hold across realms (an iframe's or a `vm` context's Uint16Array fails
 * `instanceof Uint16Array` here) and refuse look-alikes: the %TypedArray% prototype's toStringTag
 * getter reads the array's internal [[TypedArrayName]] slot, so a Proxy, a DataView or a plain
 * object whose Symbol.toStringTag says otherwise gets undefined. Looked up once at module load.
 */
const readTypedArrayName = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype) as object, Symbol.toStringTag)!
  .get as (this: unknown) => string | undefined;

/** The array's own kind ('Uint16Array', ...), or undefined for anything that is not a typed array. */
export function typedArrayName(value: unknown): string | undefined {
  return readTypedArrayName.call(value);
}

export function isUint8Array(value: unknown): value is Uint8Array {
  return readTypedArrayName.call(value) === 'Uint8Array';
}

export function isUint16Array(value: unknown): value is Uint16Array {
  return readTypedArrayName.call(value) === 'Uint16Array';
}

export function isUint32Array(value: unknown): value is Uint32Array {
  return readTypedArrayName.call(value) === 'Uint32Array';
}

/**
 * Whether a view reads as empty only because it cannot be read at all: its buffer was detached
 * (transferred), or it lies past the end of a resizable buffer that shrank. Such a view would
 * otherwise pass for an empty tensor. `includes` validates the view first (and throws for both);
 * on an empty view it then has nothing to scan, so this is O(1).
 */
export function isUnreadableView(view: Uint8Array | Uint16Array | Uint32Array | Float32Array): boolean {
  if (view.length !== 0) return false;
  try {
    view.includes(0);
    return false;
  } catch {
    return true;
  }
}

/** INVALID_ARGUMENT for a view that cannot be read (isUnreadableView), naming the argument. */
export function checkReadableView(view: Uint8Array | Uint16Array | Uint32Array | Float32Array, argument: string): void {
  if (isUnreadableView(view)) {
    throw new SplitZipError('INVALID_ARGUMENT', `${argument} cannot be read: its ArrayBuffer was detached (transferred) or shrank below the view`, {
      argument,
    });
  }
}
