// The native WebGPU decode, hand-written WGSL (not gpu.js: gpu.js kernels see only float arrays
// and have no bit casts, so they cannot read the payload's bytes in place). Two passes per slice
// of the tensor (see plan-device-slices.ts):
//   1. DECODE: one thread per 8 values reads one u32 of codes and two u32 of sign/mantissa bytes
//      and writes four u32 of BF16 pairs, every value from its code, with no escape work at all.
//   2. PATCH: one thread per escape finds its chunk by binary search in the escape index and
//      overwrites the exponent bits of its value (atomics: two escapes can share an output word).
// All index arithmetic is u32 and slice-local: a slice holds at most 2^31 values.

export const WORKGROUP_THREADS = 256;
/** Values per DECODE thread (one u32 of codes). */
export const VALUES_PER_THREAD = 8;
/** Bytes per slice record in the uniform buffer (minUniformBufferOffsetAlignment is at most 256). */
export const SLICE_RECORD_BYTES = 256;
/** u32 fields of a slice record, in order (the codebook follows, 4 exponents per u32). */
export const SLICE_FIELDS = ['count', 'escapes', 'firstEscape', 'chunkShift', 'chunks', 'posDelta', 'expDelta', 'unused'] as const;

const SLICE_STRUCT = /* wgsl */ `
struct Slice {
  count : u32,        // values in this slice
  escapes : u32,      // escapes in this slice
  firstEscape : u32,  // global number of the slice's first escape (index entries are global)
  chunkShift : u32,   // log2(chunk_size)
  chunks : u32,       // chunks in this slice
  posDelta : u32,     // bytes from the pos window's start to the slice's first position
  expDelta : u32,     // bytes from the exp window's start to the slice's first exponent
  unused : u32,
  book : vec4<u32>,   // the codebook, exponent of code k in byte k % 4 of book[k / 4]
}
@group(0) @binding(0) var<uniform> slice : Slice;
`;

export const DECODE_SHADER = /* wgsl */ `${SLICE_STRUCT}
@group(0) @binding(1) var<storage, read> codes : array<u32>;
@group(0) @binding(2) var<storage, read> sm : array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> result : array<vec4<u32>>;

// Two values from their codes (low nibbles of c) and sign/mantissa bytes (low 16 bits of s):
// the BF16 pair word, value 0 in the low half.
fn pair(book : vec4<u32>, c : u32, s : u32) -> u32 {
  let c0 = c & 15u;
  let c1 = (c >> 4u) & 15u;
  let e0 = (book[c0 >> 2u] >> ((c0 & 3u) * 8u)) & 255u;
  let e1 = (book[c1 >> 2u] >> ((c1 & 3u) * 8u)) & 255u;
  let x = (s & 0xffu) | ((s & 0xff00u) << 8u);
  return ((x & 0x00800080u) << 8u) | (x & 0x007f007fu) | (e0 << 7u) | (e1 << 23u);
}

@compute @workgroup_size(${WORKGROUP_THREADS})
fn main(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) groups : vec3<u32>) {
  let t = gid.x + gid.y * groups.x * ${WORKGROUP_THREADS}u;
  let first = t * 8u;
  if (first >= slice.count) { return; }
  let book = slice.book;
  let c = codes[t];
  let s = sm[t];
  var w = vec4<u32>(
    pair(book, c, s.x),
    pair(book, c >> 8u, s.x >> 16u),
    pair(book, c >> 16u, s.y),
    pair(book, c >> 24u, s.y >> 16u),
  );
  // The last thread of a tensor: values past the end (padding bytes) come out as 0.
  let left = slice.count - first;
  if (left < 8u) {
    for (var k = 0u; k < 4u; k++) {
      if (2u * k >= left) { w[k] = 0u; } else if (2u * k + 1u == left) { w[k] = w[k] & 0xffffu; }
    }
  }
  result[t] = w;
}
`;

export const PATCH_SHADER = /* wgsl */ `${SLICE_STRUCT}
@group(0) @binding(1) var<storage, read> escapeIndex : array<u32>;
@group(0) @binding(2) var<storage, read> positions : array<u32>;
@group(0) @binding(3) var<storage, read> exponents : array<u32>;
@group(0) @binding(4) var<storage, read_write> result : array<atomic<u32>>;

@compute @workgroup_size(${WORKGROUP_THREADS})
fn main(@builtin(global_invocation_id) gid : vec3<u32>, @builtin(num_workgroups) groups : vec3<u32>) {
  let j = gid.x + gid.y * groups.x * ${WORKGROUP_THREADS}u;
  if (j >= slice.escapes) { return; }
  let g = slice.firstEscape + j;
  // The chunk c with escapeIndex[c] <= g < escapeIndex[c + 1] (validated on the host:
  // escapeIndex[0] = firstEscape <= g < firstEscape + escapes = escapeIndex[chunks]).
  var lo = 0u;
  var hi = slice.chunks;
  loop {
    if (hi - lo <= 1u) { break; }
    let mid = (lo + hi) >> 1u;
    if (escapeIndex[mid] <= g) { lo = mid; } else { hi = mid; }
  }
  let pb = slice.posDelta + 2u * j;
  let p = (positions[pb >> 2u] >> ((pb & 2u) * 8u)) & 0xffffu;
  let eb = slice.expDelta + j;
  let e = (exponents[eb >> 2u] >> ((eb & 3u) * 8u)) & 0xffu;
  let i = (lo << slice.chunkShift) + p;
  let shift = (i & 1u) * 16u + 7u;
  atomicAnd(&result[i >> 1u], ~(0xffu << shift));
  atomicOr(&result[i >> 1u], e << shift);
}
`;
