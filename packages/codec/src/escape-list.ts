// A growable list of escapes (value index, exponent) that encoders collect in one pass, before the
// escape count, and so the payload's length, is known.
export class EscapeList {
  indices = new Uint32Array(256);
  exponents = new Uint8Array(256);
  count = 0;

  push(index: number, exponent: number): void {
    if (this.count === this.indices.length) this.grow();
    this.indices[this.count] = index;
    this.exponents[this.count] = exponent;
    this.count++;
  }

  private grow(): void {
    const indices = new Uint32Array(this.indices.length * 2);
    indices.set(this.indices);
    const exponents = new Uint8Array(this.exponents.length * 2);
    exponents.set(this.exponents);
    this.indices = indices;
    this.exponents = exponents;
  }
}
