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

/**
 * The tiled hash pass: one workgroup per checksum segment. Its second warp (threads 32..63) copies
 * the segment's spans from the input into workgroup memory a block at a time (2 KiB of codes and
 * 4 KiB of sm, coalesced 16-byte loads), double-buffered, while threads 0..23 (one per lane of each
 * of the six streams) run their chains over the block copied before. Why: the lane-per-thread pass
 * leaves each chain waiting on its own device-memory loads (the last upload piece's pass was 1.2-1.9
 * ms of a verified 2^26 decode on the H200); here a chain reads workgroup memory, and the loads of
 * block b + 1 are in flight while block b is hashed.
 */
export const TILED_HASH_WORKGROUP_THREADS = 64;
/** 16-byte stripes of the codes span per block (2 KiB: 64 rounds per codes stream). */
export const TILED_CODES_BLOCK_STRIPES = 128;
/** 16-byte stripes of the sm span per block (4 KiB: 64 rounds per sm stream). */
export const TILED_SM_BLOCK_STRIPES = 256;
/** Which device hash pass runs: `tiled` (a workgroup per segment) or `lanes` (a thread per lane, `checksumOnDeviceUnroll`). */
export type DeviceHashKernel = 'tiled' | 'lanes';
export const DEVICE_HASH_KERNELS: readonly DeviceHashKernel[] = ['tiled', 'lanes'];
/** The default device hash pass (RESULTS.md: the H200 measurements that chose it). */
export const DEFAULT_DEVICE_HASH_KERNEL: DeviceHashKernel = 'tiled';

/** WGSL of the tiled hash pass (dispatch one workgroup per segment of the group). */
export function createTiledHashShader(): string {
  const block = TILED_CODES_BLOCK_STRIPES + TILED_SM_BLOCK_STRIPES;
  // Rounds per inner step: the workgroup-memory loads of a step go out before its rounds.
  const step = 8;
  const loads = (stride: number) => Array.from({ length: step }, (_, k) => `      let w${k} = tile[at + ${4 * stride * k}u];`).join('\n');
  const rounds = Array.from({ length: step }, (_, k) => `      v = round(v, w${k});`).join('\n');
  return /* wgsl */ `
struct Group {
  firstSegment : u32,
  segments : u32,
  unused0 : u32,
  unused1 : u32,
}
struct Span {
  codesWord : u32,
  codesStripes : u32, // per codes stream (w = 2)
  smWord : u32,
  smStripes : u32,    // per sm stream (w = 4)
}
@group(0) @binding(0) var<uniform> group : Group;
@group(0) @binding(1) var<storage, read> spans : array<Span>;
@group(0) @binding(2) var<storage, read> stripes : array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> lanes : array<u32>;

const P1 = 2654435761u;
const P2 = 2246822519u;
const CODES_BLOCK = ${TILED_CODES_BLOCK_STRIPES}u;
const SM_BLOCK = ${TILED_SM_BLOCK_STRIPES}u;
const BUFFER_WORDS = ${4 * block}u;
// Two buffers of one block each, as u32 words: codes stripes, then sm stripes.
var<workgroup> tile : array<u32, ${8 * block}>;

fn round(v : u32, w : u32) -> u32 {
  let x = v + w * P2;
  return ((x << 13u) | (x >> 19u)) * P1;
}

// Loader thread i (0..31) copies block b's stripes of both spans into buffer 'base' (in words).
fn copyBlock(i : u32, b : u32, base : u32, codesFirst : u32, codesTotal : u32, smFirst : u32, smTotal : u32) {
  for (var k = i; k < CODES_BLOCK; k += 32u) {
    let g = b * CODES_BLOCK + k;
    if (g < codesTotal) {
      let q = stripes[codesFirst + g];
      let at = base + 4u * k;
      tile[at] = q.x; tile[at + 1u] = q.y; tile[at + 2u] = q.z; tile[at + 3u] = q.w;
    }
  }
  for (var k = i; k < SM_BLOCK; k += 32u) {
    let g = b * SM_BLOCK + k;
    if (g < smTotal) {
      let q = stripes[smFirst + g];
      let at = base + 4u * (CODES_BLOCK + k);
      tile[at] = q.x; tile[at + 1u] = q.y; tile[at + 2u] = q.z; tile[at + 3u] = q.w;
    }
  }
}

@compute @workgroup_size(${TILED_HASH_WORKGROUP_THREADS})
fn main(@builtin(workgroup_id) wid : vec3<u32>, @builtin(local_invocation_index) li : u32) {
  let segment = group.firstSegment + wid.x;
  let span = spans[segment];
  // Whole spans in stripes (a stripe is one vec4); spans start 16-byte aligned (256, FORMAT.md).
  let codesFirst = span.codesWord / 4u;
  let codesTotal = span.codesStripes * 2u;
  let smFirst = span.smWord / 4u;
  let smTotal = span.smStripes * 4u;
  let blocks = max((codesTotal + CODES_BLOCK - 1u) / CODES_BLOCK, (smTotal + SM_BLOCK - 1u) / SM_BLOCK);
  let stream = li / 4u;
  let lane = li % 4u;
  // XXH32's lane seeds for seed 0: P1 + P2, P2, 0, -P1.
  var v = 0u;
  switch lane {
    case 0u: { v = P1 + P2; }
    case 1u: { v = P2; }
    case 2u: { v = 0u; }
    default: { v = 0u - P1; }
  }
  if (li >= 32u) { copyBlock(li - 32u, 0u, 0u, codesFirst, codesTotal, smFirst, smTotal); }
  workgroupBarrier();
  for (var b = 0u; b < blocks; b++) {
    let base = (b & 1u) * BUFFER_WORDS;
    if (li >= 32u && b + 1u < blocks) { copyBlock(li - 32u, b + 1u, BUFFER_WORDS - base, codesFirst, codesTotal, smFirst, smTotal); }
    if (li < 24u) {
      // This stream's stripes in the block: j, j + w, ... (blocks start at multiples of w).
      var at : u32;
      var left : u32;
      var stride : u32;
      if (stream < 2u) {
        let have = min(CODES_BLOCK, codesTotal - min(codesTotal, b * CODES_BLOCK));
        at = base + 4u * stream + lane;
        left = have / 2u;
        stride = 2u;
      } else {
        let have = min(SM_BLOCK, smTotal - min(smTotal, b * SM_BLOCK));
        at = base + 4u * (CODES_BLOCK + stream - 2u) + lane;
        left = have / 4u;
        stride = 4u;
      }
      if (stride == 2u) {
        loop {
          if (left < ${step}u) { break; }
${loads(2)}
${rounds}
          at += ${4 * 2 * step}u;
          left -= ${step}u;
        }
      } else {
        loop {
          if (left < ${step}u) { break; }
${loads(4)}
${rounds}
          at += ${4 * 4 * step}u;
          left -= ${step}u;
        }
      }
      loop {
        if (left == 0u) { break; }
        v = round(v, tile[at]);
        at += 4u * stride;
        left -= 1u;
      }
    }
    workgroupBarrier();
  }
  if (li < 24u) { lanes[segment * ${HASH_THREADS_PER_SEGMENT}u + li] = v; }
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
