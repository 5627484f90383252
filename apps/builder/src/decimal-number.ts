/**
 * The one syntax the CLI takes for a number (numeric options, and the number of a duration): a
 * decimal as JavaScript writes one, digits with an optional fraction (`5`, `5.`, `.5`, `0.25`) and
 * an optional exponent (`1e-1`, `2E3`); numeric options may be signed. Not the rest of what
 * Number() takes: '' and blanks (0), hex, binary and octal (`0x10`, whose negative is NaN),
 * `Infinity`. Unanchored and without groups that capture, for composing into other patterns.
 */
export const UNSIGNED_DECIMAL_SOURCE = String.raw`(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?`;

/** A whole argument that is a decimal number, signed or not (UNSIGNED_DECIMAL_SOURCE). */
export const SIGNED_DECIMAL = new RegExp(`^[+-]?${UNSIGNED_DECIMAL_SOURCE}$`);
