/**
 * Whether two byte arrays hold the same bytes. Compared through Buffer views of their memory:
 * `Buffer.from(uint8Array)` copies, and comparing a re-read manifest that way made two extra copies
 * of it (76 MB at 64,000 entries).
 */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength === b.byteLength && Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}
