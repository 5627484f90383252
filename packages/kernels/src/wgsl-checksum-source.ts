// The format-v3 segment digests on the device (FORMAT.md, "Version 3: segments"), hand-written
// WGSL. Each checksum segment has six stripe streams (codes j = 0, 1 with w = 2; sm j = 0..3 with
// w = 4), and XXH32 keeps four lane accumulators per stream that stay independent until its final
// merge: so one thread runs one lane of one stream, 24 threads a segment. A thread writes its lane
// accumulator; the host merges the four lanes of each stream (the stream's length is a multiple of
// 16, so XXH32 has no tail bytes), finishes the digests and combines them with the header and
// escape digests it hashes itself (a few KiB). The device thus hashes the bytes its decode reads.
//
// A thread's chain is sequential (16,384 rounds for a full segment), so the loop issues
// HASH_UNROLL independent loads before it advances the chain: the loads' latency, not the rounds,
// bounds the kernel.

/** Threads per checksum segment: 6 streams x 4 XXH32 lanes. */
export const HASH_THREADS_PER_SEGMENT = 24;
/** Threads per workgroup of the hash pass (small: few threads in all, spread over many compute units). */
export const HASH_WORKGROUP_THREADS = 32;
/**
 * Stripes loaded ahead of the chain per loop iteration. On the H200 (RESULTS.md, 2026-12-03) the
 * pass's time halved from 8 to 16 to 32 and kept falling to 64: a thread's loads, not its rounds, bound it.
 */
export const DEFAULT_HASH_UNROLL = 64;
/** Bytes per hash-group record in the uniform buffer (minUniformBufferOffsetAlignment is at most 256). */
export const HASH_GROUP_RECORD_BYTES = 256;
/** Bytes per segment span record (four u32). */
export const HASH_SPAN_RECORD_BYTES = 16;

/** WGSL of the hash pass, its inner loop unrolled `unroll` times (1..64). */
export function createHashShader(unroll: number = DEFAULT_HASH_UNROLL): string {
  if (!(Number.isInteger(unroll) && unroll >= 1 && unroll <= 64)) throw new RangeError(`hash unroll ${unroll} is not an integer in 1..64`);
  const loads = Array.from({ length: unroll }, (_, k) => `    let w${k} = bytes[at + ${k}u * step];`).join('\n');
  const rounds = Array.from({ length: unroll }, (_, k) => `    v = round(v, w${k});`).join('\n');
  return /* wgsl */ `
struct Group {
  firstSegment : u32, // global number of the group's first checksum segment
  segments : u32,     // checksum segments in this group
  unused0 : u32,
  unused1 : u32,
}
// One checksum segment's spans, as u32 offsets into this group's bytes and stripe counts per stream.
struct Span {
  codesWord : u32,
  codesStripes : u32,
  smWord : u32,
  smStripes : u32,
}
@group(0) @binding(0) var<uniform> group : Group;
@group(0) @binding(1) var<storage, read> spans : array<Span>;
@group(0) @binding(2) var<storage, read> bytes : array<u32>;
@group(0) @binding(3) var<storage, read_write> lanes : array<u32>;

const P1 = 2654435761u;
const P2 = 2246822519u;

// One XXH32 round: acc = rotl(acc + input * P2, 13) * P1 (u32 arithmetic wraps, as XXH32's does).
fn round(v : u32, w : u32) -> u32 {
  let x = v + w * P2;
  return ((x << 13u) | (x >> 19u)) * P1;
}

@compute @workgroup_size(${HASH_WORKGROUP_THREADS})
fn main(@builtin(global_invocation_id) gid : vec3<u32>) {
  let t = gid.x;
  if (t >= group.segments * ${HASH_THREADS_PER_SEGMENT}u) { return; }
  let s = t / ${HASH_THREADS_PER_SEGMENT}u;
  let r = t % ${HASH_THREADS_PER_SEGMENT}u;
  let stream = r / 4u;
  let lane = r % 4u;
  let span = spans[group.firstSegment + s];
  // Stream j of a span with w ways: stripes j, j + w, ...; a stripe is 4 words, so the stream's
  // words for this lane are at first + lane, then every 4 * w words.
  var at : u32;
  var left : u32;
  var step : u32;
  if (stream < 2u) {
    at = span.codesWord + stream * 4u + lane;
    left = span.codesStripes;
    step = 8u;
  } else {
    at = span.smWord + (stream - 2u) * 4u + lane;
    left = span.smStripes;
    step = 16u;
  }
  // XXH32's lane seeds for seed 0: P1 + P2, P2, 0, -P1.
  var v = 0u;
  switch lane {
    case 0u: { v = P1 + P2; }
    case 1u: { v = P2; }
    case 2u: { v = 0u; }
    default: { v = 0u - P1; }
  }
  loop {
    if (left < ${unroll}u) { break; }
${loads}
${rounds}
    at += ${unroll}u * step;
    left -= ${unroll}u;
  }
  loop {
    if (left == 0u) { break; }
    v = round(v, bytes[at]);
    at += step;
    left -= 1u;
  }
  lanes[(group.firstSegment + s) * ${HASH_THREADS_PER_SEGMENT}u + r] = v;
}
`;
}

const P2 = 2246822519;
const P3 = 3266489917;
const rotl = (x: number, r: number): number => ((x << r) | (x >>> (32 - r))) >>> 0;

/**
 * Finishes stream digests from the device's lane accumulators: `lanes` holds 4 per stream, `streamBytes[k]`
 * is stream k's length (a multiple of 16, at least 16). XXH32's merge, length and avalanche.
 */
export function finishStreamDigests(lanes: Uint32Array, streamBytes: ArrayLike<number>, out: Uint32Array): void {
  for (let k = 0; k < out.length; k++) {
    let h = rotl(lanes[4 * k]!, 1) + rotl(lanes[4 * k + 1]!, 7) + rotl(lanes[4 * k + 2]!, 12) + rotl(lanes[4 * k + 3]!, 18);
    h = (h + streamBytes[k]!) >>> 0;
    h ^= h >>> 15;
    h = Math.imul(h, P2);
    h ^= h >>> 13;
    h = Math.imul(h, P3);
    h ^= h >>> 16;
    out[k] = h >>> 0;
  }
}
