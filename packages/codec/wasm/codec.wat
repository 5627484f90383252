;; SplitZip codec kernels, WebAssembly SIMD (FORMAT.md is the byte-level contract).
;;
;; The memory is imported: one fixed-size memory per instance (never grown, so views on it stay
;; valid). The JS side (src/wasm/wasm-kernels.ts) passes pointers straight into it where the data
;; lives there already (a codec arena), else copies one block at a time into the scratch area below
;; and out again while it is still in cache. Every kernel works on whole groups of 32 values.
;;
;; Fixed memory map (bytes):
;;   0..15    decode table: code -> exponent rotated right by one bit, (e >> 1) | (e & 1) << 7
;;   16..31   unused
;;   32..47   XXH32 lanes v1..v4 (i32 each) of the codes section's digest, carried between calls
;;   48..63   XXH32 lanes of the sm section's digest (format v1), or of its even 16-byte stripes (v2)
;;   64..79   XXH32 lanes of the sm section's odd 16-byte stripes (v2)
;;   Format v3 (one segment at a time, six chains; FORMAT.md "Version 3: segments"):
;;   32 codes stream 0, 48 sm stream 0, 64 sm stream 1 (an even group's chains),
;;   80 codes stream 1, 96 sm stream 2, 112 sm stream 3 (an odd group's chains)
;;   1024..1535 encode tables: up to 16 windows x 32 bytes (see $lookup)
;;   1536..1599 escape scratch: 32 exponents then 32 (code + 1) bytes of one group
;;   2048..3087 a shared arena's share locks (owner's area only; src/arena-share-lock.ts), unused here
;;   4096..   block buffers, placed by the JS side
(module
  (import "env" "memory" (memory 1))
  ;; Where this instance's scratch area (the fixed map above) starts: 0 for a private memory;
  ;; in a shared memory every thread's instance has its own area, so they never touch each other's.
  (import "env" "base" (global $base i32))

  ;; XXH32 primes.
  (global $P1 i32 (i32.const 0x9E3779B1))
  (global $P2 i32 (i32.const 0x85EBCA77))

  ;; ---------------------------------------------------------------------------------------------
  ;; decode: $groups x 32 values. Codes at $c (16 bytes a group), sm at $s (32), output u16 at $o (64).
  ;; Returns the largest code nibble seen, for the codebook-size check. With $hash it also runs the
  ;; XXH32 stripe loops over the same bytes: the codes section's (lanes at 32) and, $hash = 1 (format
  ;; v1), the sm section's as one chain (lanes at 48; two dependent rounds a group), or, $hash = 2
  ;; (v2), its even and odd stripes as two chains (lanes at 48 and 64; one round each a group). The
  ;; chains are independent of each other and of the decode work, so they overlap; v2's shorter
  ;; chain per group is why that format splits the sm digest. $hash = 3 or 4 (v3): $decode_v3.
  (func $decode (export "decode") (param $c i32) (param $s i32) (param $o i32) (param $groups i32) (param $hash i32) (result i32)
    (local $hw v128) (local $thi v128) (local $m0f v128) (local $m80 v128) (local $t v128) (local $a v128)
    (local $maxlo v128) (local $maxb v128)
    (local $b v128) (local $lo v128) (local $hi v128) (local $x v128) (local $h v128) (local $l v128)
    (local $end i32) (local $hv v128) (local $hc v128) (local $p1 v128) (local $p2 v128)
    (if (i32.ge_u (local.get $hash) (i32.const 3))
      (then (return (call $decode_v3 (local.get $c) (local.get $s) (local.get $o) (local.get $groups) (local.get $hash)))))
    (local.set $hv (v128.load offset=48 (global.get $base)))
    (local.set $p1 (i32x4.splat (global.get $P1)))
    (local.set $p2 (i32x4.splat (global.get $P2)))
    (local.set $thi (v128.load offset=0 (global.get $base)))
        (local.set $m0f (i8x16.splat (i32.const 0x0F)))
    (local.set $m80 (i8x16.splat (i32.const 0x80)))
    (local.set $hc (v128.load offset=32 (global.get $base)))
    (local.set $hw (v128.load offset=64 (global.get $base)))
    (local.set $end (i32.add (local.get $c) (i32.shl (local.get $groups) (i32.const 4))))
    (block $done
      (br_if $done (i32.eqz (local.get $groups)))
      (loop $next
        (local.set $b (v128.load (local.get $c)))
        (local.set $lo (v128.and (local.get $b) (local.get $m0f)))
        ;; A 16-bit shift then the nibble mask: i8x16.shr_u has no x86 instruction and costs more.
        (local.set $hi (v128.and (i16x8.shr_u (local.get $b) (i32.const 4)) (local.get $m0f)))
        (local.set $maxlo (i8x16.max_u (local.get $maxlo) (local.get $lo)))
        (local.set $maxb (i8x16.max_u (local.get $maxb) (local.get $b)))
        ;; values 0..15: codes interleaved low nibble, high nibble; t = the table's rotated exponent
        ;; (e >> 1 | (e & 1) << 7): its bit 7 goes to the low byte, bits 0..6 to the high byte, and
        ;; the sm byte x gives the other bits. With a = (t ^ x) & 0x80: high = t ^ a (x's sign bit,
        ;; t's 7 bits), low = x ^ a (t's bit 7, x's mantissa) — one lookup per value instead of two.
        (local.set $t (i8x16.swizzle (local.get $thi) (i8x16.shuffle 0 16 1 17 2 18 3 19 4 20 5 21 6 22 7 23 (local.get $lo) (local.get $hi))))
        (local.set $x (v128.load (local.get $s)))
        (local.set $a (v128.and (v128.xor (local.get $t) (local.get $x)) (local.get $m80)))
        (local.set $h (v128.xor (local.get $t) (local.get $a)))
        (local.set $l (v128.xor (local.get $x) (local.get $a)))
        (v128.store (local.get $o) (i8x16.shuffle 0 16 1 17 2 18 3 19 4 20 5 21 6 22 7 23 (local.get $l) (local.get $h)))
        (v128.store offset=16 (local.get $o) (i8x16.shuffle 8 24 9 25 10 26 11 27 12 28 13 29 14 30 15 31 (local.get $l) (local.get $h)))
        ;; values 16..31
        (local.set $t (i8x16.swizzle (local.get $thi) (i8x16.shuffle 8 24 9 25 10 26 11 27 12 28 13 29 14 30 15 31 (local.get $lo) (local.get $hi))))
        (local.set $x (v128.load offset=16 (local.get $s)))
        (local.set $a (v128.and (v128.xor (local.get $t) (local.get $x)) (local.get $m80)))
        (local.set $h (v128.xor (local.get $t) (local.get $a)))
        (local.set $l (v128.xor (local.get $x) (local.get $a)))
        (v128.store offset=32 (local.get $o) (i8x16.shuffle 0 16 1 17 2 18 3 19 4 20 5 21 6 22 7 23 (local.get $l) (local.get $h)))
        (v128.store offset=48 (local.get $o) (i8x16.shuffle 8 24 9 25 10 26 11 27 12 28 13 29 14 30 15 31 (local.get $l) (local.get $h)))
        (if (local.get $hash)
          (then
            (local.set $hc (i32x4.mul (v128.or (i32x4.shl (local.tee $hc (i32x4.add (local.get $hc) (i32x4.mul (local.get $b) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $hc) (i32.const 19))) (local.get $p1)))
            (local.set $hv (i32x4.mul (v128.or (i32x4.shl (local.tee $hv (i32x4.add (local.get $hv) (i32x4.mul (v128.load (local.get $s)) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $hv) (i32.const 19))) (local.get $p1)))
            ;; v2: the odd stripe to its own chain; v1: the same chain's second round
            (if (i32.eq (local.get $hash) (i32.const 2))
              (then
                (local.set $hw (i32x4.mul (v128.or (i32x4.shl (local.tee $hw (i32x4.add (local.get $hw) (i32x4.mul (v128.load offset=16 (local.get $s)) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $hw) (i32.const 19))) (local.get $p1))))
              (else
                (local.set $hv (i32x4.mul (v128.or (i32x4.shl (local.tee $hv (i32x4.add (local.get $hv) (i32x4.mul (v128.load offset=16 (local.get $s)) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $hv) (i32.const 19))) (local.get $p1)))))))
        (local.set $c (i32.add (local.get $c) (i32.const 16)))
        (local.set $s (i32.add (local.get $s) (i32.const 32)))
        (local.set $o (i32.add (local.get $o) (i32.const 64)))
        (br_if $next (i32.lt_u (local.get $c) (local.get $end)))))
    (v128.store offset=32 (global.get $base) (local.get $hc))
    (v128.store offset=48 (global.get $base) (local.get $hv))
    (v128.store offset=64 (global.get $base) (local.get $hw))
    (call $max_lane (i8x16.max_u (local.get $maxlo) (i8x16.shr_u (local.get $maxb) (i32.const 4)))))

  ;; ---------------------------------------------------------------------------------------------
  ;; decode_v3: decode's $hash = 3 (format v3, the first group even within its segment) or 4 (odd).
  ;; Two groups per iteration, so each of the six chains has a fixed stripe: the even group feeds
  ;; codes stream 0 and sm streams 0, 1; the odd group codes stream 1 and sm streams 2, 3. Every chain
  ;; advances once per two groups, off the decode's critical path. A leading odd or trailing even
  ;; group goes through decode without hashing plus hash_groups.
  (func $decode_v3 (param $c i32) (param $s i32) (param $o i32) (param $groups i32) (param $hash i32) (result i32)
    (local $thi v128) (local $m0f v128) (local $m80 v128) (local $t v128) (local $a v128)
    (local $maxlo v128) (local $maxb v128)
    (local $b v128) (local $lo v128) (local $hi v128) (local $x v128) (local $h v128) (local $l v128)
    (local $end i32) (local $max i32) (local $m i32) (local $p1 v128) (local $p2 v128)
    (local $hc0 v128) (local $hc1 v128) (local $h0 v128) (local $h1 v128) (local $h2 v128) (local $h3 v128)
    (if (i32.and (i32.eq (local.get $hash) (i32.const 4)) (i32.ne (local.get $groups) (i32.const 0)))
      (then
        (local.set $max (call $decode (local.get $c) (local.get $s) (local.get $o) (i32.const 1) (i32.const 0)))
        (call $hash_groups (local.get $c) (local.get $s) (i32.const 1) (i32.const 4))
        (local.set $c (i32.add (local.get $c) (i32.const 16)))
        (local.set $s (i32.add (local.get $s) (i32.const 32)))
        (local.set $o (i32.add (local.get $o) (i32.const 64)))
        (local.set $groups (i32.sub (local.get $groups) (i32.const 1)))))
    (local.set $hc0 (v128.load offset=32 (global.get $base)))
    (local.set $h0 (v128.load offset=48 (global.get $base)))
    (local.set $h1 (v128.load offset=64 (global.get $base)))
    (local.set $hc1 (v128.load offset=80 (global.get $base)))
    (local.set $h2 (v128.load offset=96 (global.get $base)))
    (local.set $h3 (v128.load offset=112 (global.get $base)))
    (local.set $p1 (i32x4.splat (global.get $P1)))
    (local.set $p2 (i32x4.splat (global.get $P2)))
    (local.set $thi (v128.load offset=0 (global.get $base)))
    (local.set $m0f (i8x16.splat (i32.const 0x0F)))
    (local.set $m80 (i8x16.splat (i32.const 0x80)))
    (local.set $end (i32.add (local.get $c) (i32.shl (i32.shr_u (local.get $groups) (i32.const 1)) (i32.const 5))))
    (block $done
      (br_if $done (i32.lt_u (local.get $groups) (i32.const 2)))
      (loop $next
        ;; the even group
        (local.set $b (v128.load (local.get $c)))
        (local.set $lo (v128.and (local.get $b) (local.get $m0f)))
        (local.set $hi (v128.and (i16x8.shr_u (local.get $b) (i32.const 4)) (local.get $m0f)))
        (local.set $maxlo (i8x16.max_u (local.get $maxlo) (local.get $lo)))
        (local.set $maxb (i8x16.max_u (local.get $maxb) (local.get $b)))
        (local.set $t (i8x16.swizzle (local.get $thi) (i8x16.shuffle 0 16 1 17 2 18 3 19 4 20 5 21 6 22 7 23 (local.get $lo) (local.get $hi))))
        (local.set $x (v128.load (local.get $s)))
        (local.set $a (v128.and (v128.xor (local.get $t) (local.get $x)) (local.get $m80)))
        (local.set $h (v128.xor (local.get $t) (local.get $a)))
        (local.set $l (v128.xor (local.get $x) (local.get $a)))
        (v128.store (local.get $o) (i8x16.shuffle 0 16 1 17 2 18 3 19 4 20 5 21 6 22 7 23 (local.get $l) (local.get $h)))
        (v128.store offset=16 (local.get $o) (i8x16.shuffle 8 24 9 25 10 26 11 27 12 28 13 29 14 30 15 31 (local.get $l) (local.get $h)))
        (local.set $t (i8x16.swizzle (local.get $thi) (i8x16.shuffle 8 24 9 25 10 26 11 27 12 28 13 29 14 30 15 31 (local.get $lo) (local.get $hi))))
        (local.set $x (v128.load offset=16 (local.get $s)))
        (local.set $a (v128.and (v128.xor (local.get $t) (local.get $x)) (local.get $m80)))
        (local.set $h (v128.xor (local.get $t) (local.get $a)))
        (local.set $l (v128.xor (local.get $x) (local.get $a)))
        (v128.store offset=32 (local.get $o) (i8x16.shuffle 0 16 1 17 2 18 3 19 4 20 5 21 6 22 7 23 (local.get $l) (local.get $h)))
        (v128.store offset=48 (local.get $o) (i8x16.shuffle 8 24 9 25 10 26 11 27 12 28 13 29 14 30 15 31 (local.get $l) (local.get $h)))
        (local.set $hc0 (i32x4.mul (v128.or (i32x4.shl (local.tee $hc0 (i32x4.add (local.get $hc0) (i32x4.mul (local.get $b) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $hc0) (i32.const 19))) (local.get $p1)))
        (local.set $h0 (i32x4.mul (v128.or (i32x4.shl (local.tee $h0 (i32x4.add (local.get $h0) (i32x4.mul (v128.load (local.get $s)) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $h0) (i32.const 19))) (local.get $p1)))
        (local.set $h1 (i32x4.mul (v128.or (i32x4.shl (local.tee $h1 (i32x4.add (local.get $h1) (i32x4.mul (v128.load offset=16 (local.get $s)) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $h1) (i32.const 19))) (local.get $p1)))
        ;; the odd group
        (local.set $b (v128.load offset=16 (local.get $c)))
        (local.set $lo (v128.and (local.get $b) (local.get $m0f)))
        (local.set $hi (v128.and (i16x8.shr_u (local.get $b) (i32.const 4)) (local.get $m0f)))
        (local.set $maxlo (i8x16.max_u (local.get $maxlo) (local.get $lo)))
        (local.set $maxb (i8x16.max_u (local.get $maxb) (local.get $b)))
        (local.set $t (i8x16.swizzle (local.get $thi) (i8x16.shuffle 0 16 1 17 2 18 3 19 4 20 5 21 6 22 7 23 (local.get $lo) (local.get $hi))))
        (local.set $x (v128.load offset=32 (local.get $s)))
        (local.set $a (v128.and (v128.xor (local.get $t) (local.get $x)) (local.get $m80)))
        (local.set $h (v128.xor (local.get $t) (local.get $a)))
        (local.set $l (v128.xor (local.get $x) (local.get $a)))
        (v128.store offset=64 (local.get $o) (i8x16.shuffle 0 16 1 17 2 18 3 19 4 20 5 21 6 22 7 23 (local.get $l) (local.get $h)))
        (v128.store offset=80 (local.get $o) (i8x16.shuffle 8 24 9 25 10 26 11 27 12 28 13 29 14 30 15 31 (local.get $l) (local.get $h)))
        (local.set $t (i8x16.swizzle (local.get $thi) (i8x16.shuffle 8 24 9 25 10 26 11 27 12 28 13 29 14 30 15 31 (local.get $lo) (local.get $hi))))
        (local.set $x (v128.load offset=48 (local.get $s)))
        (local.set $a (v128.and (v128.xor (local.get $t) (local.get $x)) (local.get $m80)))
        (local.set $h (v128.xor (local.get $t) (local.get $a)))
        (local.set $l (v128.xor (local.get $x) (local.get $a)))
        (v128.store offset=96 (local.get $o) (i8x16.shuffle 0 16 1 17 2 18 3 19 4 20 5 21 6 22 7 23 (local.get $l) (local.get $h)))
        (v128.store offset=112 (local.get $o) (i8x16.shuffle 8 24 9 25 10 26 11 27 12 28 13 29 14 30 15 31 (local.get $l) (local.get $h)))
        (local.set $hc1 (i32x4.mul (v128.or (i32x4.shl (local.tee $hc1 (i32x4.add (local.get $hc1) (i32x4.mul (local.get $b) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $hc1) (i32.const 19))) (local.get $p1)))
        (local.set $h2 (i32x4.mul (v128.or (i32x4.shl (local.tee $h2 (i32x4.add (local.get $h2) (i32x4.mul (v128.load offset=32 (local.get $s)) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $h2) (i32.const 19))) (local.get $p1)))
        (local.set $h3 (i32x4.mul (v128.or (i32x4.shl (local.tee $h3 (i32x4.add (local.get $h3) (i32x4.mul (v128.load offset=48 (local.get $s)) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $h3) (i32.const 19))) (local.get $p1)))
        (local.set $c (i32.add (local.get $c) (i32.const 32)))
        (local.set $s (i32.add (local.get $s) (i32.const 64)))
        (local.set $o (i32.add (local.get $o) (i32.const 128)))
        (br_if $next (i32.lt_u (local.get $c) (local.get $end)))))
    (v128.store offset=32 (global.get $base) (local.get $hc0))
    (v128.store offset=48 (global.get $base) (local.get $h0))
    (v128.store offset=64 (global.get $base) (local.get $h1))
    (v128.store offset=80 (global.get $base) (local.get $hc1))
    (v128.store offset=96 (global.get $base) (local.get $h2))
    (v128.store offset=112 (global.get $base) (local.get $h3))
    (if (i32.and (local.get $groups) (i32.const 1))
      (then
        (local.set $m (call $decode (local.get $c) (local.get $s) (local.get $o) (i32.const 1) (i32.const 0)))
        (if (i32.gt_u (local.get $m) (local.get $max)) (then (local.set $max (local.get $m))))
        (call $hash_groups (local.get $c) (local.get $s) (i32.const 1) (i32.const 3))))
    (local.set $m (call $max_lane (i8x16.max_u (local.get $maxlo) (i8x16.shr_u (local.get $maxb) (i32.const 4)))))
    (select (local.get $m) (local.get $max) (i32.gt_u (local.get $m) (local.get $max))))

  ;; Largest unsigned byte of a vector.
  (func $max_lane (param $v v128) (result i32)
    (local $m i32) (local $n i32)
    ;; Wide-lane shifts fold each lane's upper bytes onto its lowest byte (no shuffle constants: a smaller module).
    (local.set $v (i8x16.max_u (local.get $v) (i16x8.shr_u (local.get $v) (i32.const 8))))
    (local.set $v (i8x16.max_u (local.get $v) (i32x4.shr_u (local.get $v) (i32.const 16))))
    (local.set $v (i8x16.max_u (local.get $v) (i64x2.shr_u (local.get $v) (i32.const 32))))
    (select (local.tee $m (i8x16.extract_lane_u 0 (local.get $v))) (local.tee $n (i8x16.extract_lane_u 8 (local.get $v))) (i32.gt_u (local.get $m) (local.get $n))))

  ;; ---------------------------------------------------------------------------------------------
  ;; hash_groups: the codes and sm digests' stripe loops of decode without the decoding (for
  ;; verifyPayloadChecksum, the segment digests and the payload writer): $groups x (16 code bytes at
  ;; $c, 32 sm bytes at $s); $mode as decode's $hash (1: v1, one sm chain; 2: v2, even and odd sm
  ;; chains; 3 and 4: v3's six chains, the first group even or odd within its segment, two groups
  ;; per iteration). A single v3 group is a v2 group on that parity's three lane sets (internal mode
  ;; 5: v2's loop on the odd group's lanes, 48 bytes further on), which keeps the module small.
  (func $hash_groups (export "hash_groups") (param $c i32) (param $s i32) (param $groups i32) (param $mode i32)
    (local $hc v128) (local $hv v128) (local $hw v128) (local $p1 v128) (local $p2 v128) (local $end i32) (local $at i32)
    (local $hc0 v128) (local $hc1 v128) (local $h0 v128) (local $h1 v128) (local $h2 v128) (local $h3 v128)
    (local.set $p1 (i32x4.splat (global.get $P1)))
    (local.set $p2 (i32x4.splat (global.get $P2)))
    (if (i32.and (i32.eq (local.get $mode) (i32.const 4)) (i32.ne (local.get $groups) (i32.const 0)))
      (then
        (call $hash_groups (local.get $c) (local.get $s) (i32.const 1) (i32.const 5))
        (local.set $c (i32.add (local.get $c) (i32.const 16)))
        (local.set $s (i32.add (local.get $s) (i32.const 32)))
        (local.set $groups (i32.sub (local.get $groups) (i32.const 1)))))
    (if (i32.and (i32.ge_u (local.get $mode) (i32.const 3)) (i32.le_u (local.get $mode) (i32.const 4)))
      (then
          (local.set $hc0 (v128.load offset=32 (global.get $base)))
          (local.set $h0 (v128.load offset=48 (global.get $base)))
          (local.set $h1 (v128.load offset=64 (global.get $base)))
          (local.set $hc1 (v128.load offset=80 (global.get $base)))
          (local.set $h2 (v128.load offset=96 (global.get $base)))
          (local.set $h3 (v128.load offset=112 (global.get $base)))
          (local.set $end (i32.add (local.get $c) (i32.shl (i32.shr_u (local.get $groups) (i32.const 1)) (i32.const 5))))
          (block $pairs_done
            (br_if $pairs_done (i32.lt_u (local.get $groups) (i32.const 2)))
            (loop $pairs
              (local.set $hc0 (i32x4.mul (v128.or (i32x4.shl (local.tee $hc0 (i32x4.add (local.get $hc0) (i32x4.mul (v128.load (local.get $c)) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $hc0) (i32.const 19))) (local.get $p1)))
              (local.set $h0 (i32x4.mul (v128.or (i32x4.shl (local.tee $h0 (i32x4.add (local.get $h0) (i32x4.mul (v128.load (local.get $s)) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $h0) (i32.const 19))) (local.get $p1)))
              (local.set $h1 (i32x4.mul (v128.or (i32x4.shl (local.tee $h1 (i32x4.add (local.get $h1) (i32x4.mul (v128.load offset=16 (local.get $s)) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $h1) (i32.const 19))) (local.get $p1)))
              (local.set $hc1 (i32x4.mul (v128.or (i32x4.shl (local.tee $hc1 (i32x4.add (local.get $hc1) (i32x4.mul (v128.load offset=16 (local.get $c)) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $hc1) (i32.const 19))) (local.get $p1)))
              (local.set $h2 (i32x4.mul (v128.or (i32x4.shl (local.tee $h2 (i32x4.add (local.get $h2) (i32x4.mul (v128.load offset=32 (local.get $s)) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $h2) (i32.const 19))) (local.get $p1)))
              (local.set $h3 (i32x4.mul (v128.or (i32x4.shl (local.tee $h3 (i32x4.add (local.get $h3) (i32x4.mul (v128.load offset=48 (local.get $s)) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $h3) (i32.const 19))) (local.get $p1)))
              (local.set $c (i32.add (local.get $c) (i32.const 32)))
              (local.set $s (i32.add (local.get $s) (i32.const 64)))
              (br_if $pairs (i32.lt_u (local.get $c) (local.get $end)))))
          (v128.store offset=32 (global.get $base) (local.get $hc0))
          (v128.store offset=48 (global.get $base) (local.get $h0))
          (v128.store offset=64 (global.get $base) (local.get $h1))
          (v128.store offset=80 (global.get $base) (local.get $hc1))
          (v128.store offset=96 (global.get $base) (local.get $h2))
          (v128.store offset=112 (global.get $base) (local.get $h3))
          ;; a trailing even group: v2's loop on the even group's lanes
          (if (i32.and (local.get $groups) (i32.const 1))
            (then (call $hash_groups (local.get $c) (local.get $s) (i32.const 1) (i32.const 2))))
        (return)))
    ;; v1, v2 (and mode 5): lanes at $at + 32, 48, 64
    (if (i32.eq (local.get $mode) (i32.const 5))
      (then (local.set $at (i32.const 48)) (local.set $mode (i32.const 2))))
    (local.set $at (i32.add (global.get $base) (local.get $at)))
    (local.set $hc (v128.load offset=32 (local.get $at)))
    (local.set $hv (v128.load offset=48 (local.get $at)))
    (local.set $hw (v128.load offset=64 (local.get $at)))
    (local.set $end (i32.add (local.get $c) (i32.shl (local.get $groups) (i32.const 4))))
    (block $done
      (br_if $done (i32.eqz (local.get $groups)))
      (loop $v12
        (local.set $hc (i32x4.mul (v128.or (i32x4.shl (local.tee $hc (i32x4.add (local.get $hc) (i32x4.mul (v128.load (local.get $c)) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $hc) (i32.const 19))) (local.get $p1)))
        (local.set $hv (i32x4.mul (v128.or (i32x4.shl (local.tee $hv (i32x4.add (local.get $hv) (i32x4.mul (v128.load (local.get $s)) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $hv) (i32.const 19))) (local.get $p1)))
        (if (i32.eq (local.get $mode) (i32.const 2))
          (then
            (local.set $hw (i32x4.mul (v128.or (i32x4.shl (local.tee $hw (i32x4.add (local.get $hw) (i32x4.mul (v128.load offset=16 (local.get $s)) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $hw) (i32.const 19))) (local.get $p1))))
          (else
            (local.set $hv (i32x4.mul (v128.or (i32x4.shl (local.tee $hv (i32x4.add (local.get $hv) (i32x4.mul (v128.load offset=16 (local.get $s)) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $hv) (i32.const 19))) (local.get $p1)))))
        (local.set $c (i32.add (local.get $c) (i32.const 16)))
        (local.set $s (i32.add (local.get $s) (i32.const 32)))
        (br_if $v12 (i32.lt_u (local.get $c) (local.get $end)))))
    (v128.store offset=32 (local.get $at) (local.get $hc))
    (v128.store offset=48 (local.get $at) (local.get $hv))
    (v128.store offset=64 (local.get $at) (local.get $hw)))

  ;; ---------------------------------------------------------------------------------------------
  ;; Exponent -> code lookup. The codebook is covered by $tables windows of 16 consecutive exponents;
  ;; window t has 16 (code + 1) entries at 1024 + 32t (0 = not in the codebook) and its first
  ;; exponent splatted at 1024 + 32t + 16. i8x16.swizzle gives 0 for an index >= 16, and e - base
  ;; wraps to >= 16 below the window, so each window is one sub + swizzle, OR-ed together. A
  ;; calibrated codebook is usually 16 consecutive exponents: one window, inlined in the loops below
  ;; (hand-inlined: the engine does not inline wasm calls), the rest in $lookup_more.
  (func $lookup_more (param $e v128) (param $k v128) (param $tables i32) (result v128)
    (local $t i32) (local $tend i32)
    (local.set $t (i32.add (global.get $base) (i32.const 1056)))
    (local.set $tend (i32.add (i32.add (global.get $base) (i32.const 1024)) (i32.shl (local.get $tables) (i32.const 5))))
    (loop $table
      (local.set $k (v128.or (local.get $k)
        (i8x16.swizzle (v128.load (local.get $t)) (i8x16.sub (local.get $e) (v128.load offset=16 (local.get $t))))))
      (local.set $t (i32.add (local.get $t) (i32.const 32)))
      (br_if $table (i32.lt_u (local.get $t) (local.get $tend))))
    (local.get $k))

  ;; count_escapes: values whose exponent has no code, over $groups x 32 u16 values at $in.
  (func $count_escapes (export "count_escapes") (param $in i32) (param $groups i32) (param $tables i32) (result i32)
    (local $end i32) (local $count i32) (local $ea v128) (local $eb v128) (local $ka v128) (local $kb v128)
    (local $t0 v128) (local $b0 v128) (local $mff v128) (local $zero v128)
    (local.set $t0 (v128.load offset=1024 (global.get $base)))
    (local.set $b0 (v128.load offset=1040 (global.get $base)))
    (local.set $mff (i16x8.splat (i32.const 0xFF)))
    (local.set $end (i32.add (local.get $in) (i32.shl (local.get $groups) (i32.const 6))))
    (block $done
      (br_if $done (i32.eqz (local.get $groups)))
      (loop $next
        (local.set $ea (i8x16.narrow_i16x8_u
          (v128.and (i16x8.shr_u (v128.load (local.get $in)) (i32.const 7)) (local.get $mff))
          (v128.and (i16x8.shr_u (v128.load offset=16 (local.get $in)) (i32.const 7)) (local.get $mff))))
        (local.set $eb (i8x16.narrow_i16x8_u
          (v128.and (i16x8.shr_u (v128.load offset=32 (local.get $in)) (i32.const 7)) (local.get $mff))
          (v128.and (i16x8.shr_u (v128.load offset=48 (local.get $in)) (i32.const 7)) (local.get $mff))))
        (local.set $ka (i8x16.swizzle (local.get $t0) (i8x16.sub (local.get $ea) (local.get $b0))))
        (if (i32.gt_u (local.get $tables) (i32.const 1))
          (then (local.set $ka (call $lookup_more (local.get $ea) (local.get $ka) (local.get $tables)))))
        (local.set $kb (i8x16.swizzle (local.get $t0) (i8x16.sub (local.get $eb) (local.get $b0))))
        (if (i32.gt_u (local.get $tables) (i32.const 1))
          (then (local.set $kb (call $lookup_more (local.get $eb) (local.get $kb) (local.get $tables)))))
        (if (i32.eqz (i8x16.all_true (i8x16.min_u (local.get $ka) (local.get $kb))))
          (then
            (local.set $count (i32.add (local.get $count)
              (i32.add
                (i32.popcnt (i8x16.bitmask (i8x16.eq (local.get $ka) (local.get $zero))))
                (i32.popcnt (i8x16.bitmask (i8x16.eq (local.get $kb) (local.get $zero)))))))))
        (local.set $in (i32.add (local.get $in) (i32.const 64)))
        (br_if $next (i32.lt_u (local.get $in) (local.get $end)))))
    (local.get $count))

  ;; ---------------------------------------------------------------------------------------------
  ;; encode: $groups x 32 u16 values at $in -> codes at $c (16 bytes a group), sm at $s (32).
  ;; Escapes (exponent without a code) get code 0; each one's index relative to $in (u32) goes to
  ;; $escIdx and its exponent (u8) to $escExp. Returns the number of escapes written. With $hash
  ;; set, the codes and sm bytes also run through the six XXH32 chains of a format v3 segment (the
  ;; first group even within its segment; lanes as decode_v3's, exchanged after an odd count), so
  ;; the encoder needs no separate pass for the checksum.
  (func $encode (export "encode") (param $in i32) (param $c i32) (param $s i32) (param $groups i32)
      (param $escIdx i32) (param $escExp i32) (param $tables i32) (param $hash i32) (result i32)
    (local $v0 v128) (local $v1 v128) (local $v2 v128) (local $v3 v128)
    (local $ea v128) (local $eb v128) (local $ka v128) (local $kb v128)
    (local $t0 v128) (local $b0 v128) (local $mff v128) (local $m80 v128) (local $m7f v128) (local $one v128)
    (local $codes v128) (local $hc v128) (local $hv v128) (local $hw v128) (local $p1 v128) (local $p2 v128) (local $sa v128) (local $sb v128)
    (local $end i32) (local $count i32) (local $in0 i32)
    (local.set $hc (v128.load offset=32 (global.get $base)))
    (local.set $hv (v128.load offset=48 (global.get $base)))
    (local.set $hw (v128.load offset=64 (global.get $base)))
    (local.set $p1 (i32x4.splat (global.get $P1)))
    (local.set $p2 (i32x4.splat (global.get $P2)))
    (local.set $t0 (v128.load offset=1024 (global.get $base)))
    (local.set $b0 (v128.load offset=1040 (global.get $base)))
    (local.set $mff (i16x8.splat (i32.const 0xFF)))
    (local.set $m80 (i16x8.splat (i32.const 0x80)))
    (local.set $m7f (i16x8.splat (i32.const 0x7F)))
    (local.set $one (i8x16.splat (i32.const 1)))
    (local.set $in0 (local.get $in))
    (local.set $end (i32.add (local.get $in) (i32.shl (local.get $groups) (i32.const 6))))
    (block $done
      (br_if $done (i32.eqz (local.get $groups)))
      (loop $next
        (local.set $v0 (v128.load (local.get $in)))
        (local.set $v1 (v128.load offset=16 (local.get $in)))
        (local.set $v2 (v128.load offset=32 (local.get $in)))
        (local.set $v3 (v128.load offset=48 (local.get $in)))
        (local.set $sa (i8x16.narrow_i16x8_u
          (v128.or (v128.and (i16x8.shr_u (local.get $v0) (i32.const 8)) (local.get $m80)) (v128.and (local.get $v0) (local.get $m7f)))
          (v128.or (v128.and (i16x8.shr_u (local.get $v1) (i32.const 8)) (local.get $m80)) (v128.and (local.get $v1) (local.get $m7f)))))
        (local.set $sb (i8x16.narrow_i16x8_u
          (v128.or (v128.and (i16x8.shr_u (local.get $v2) (i32.const 8)) (local.get $m80)) (v128.and (local.get $v2) (local.get $m7f)))
          (v128.or (v128.and (i16x8.shr_u (local.get $v3) (i32.const 8)) (local.get $m80)) (v128.and (local.get $v3) (local.get $m7f)))))
        (v128.store (local.get $s) (local.get $sa))
        (v128.store offset=16 (local.get $s) (local.get $sb))
        ;; The exponent as (v << 1) >> 8: no mask, so one constant fewer held in registers.
        (local.set $ea (i8x16.narrow_i16x8_u
          (i16x8.shr_u (i16x8.shl (local.get $v0) (i32.const 1)) (i32.const 8))
          (i16x8.shr_u (i16x8.shl (local.get $v1) (i32.const 1)) (i32.const 8))))
        (local.set $eb (i8x16.narrow_i16x8_u
          (i16x8.shr_u (i16x8.shl (local.get $v2) (i32.const 1)) (i32.const 8))
          (i16x8.shr_u (i16x8.shl (local.get $v3) (i32.const 1)) (i32.const 8))))
        (local.set $ka (i8x16.swizzle (local.get $t0) (i8x16.sub (local.get $ea) (local.get $b0))))
        (if (i32.gt_u (local.get $tables) (i32.const 1))
          (then (local.set $ka (call $lookup_more (local.get $ea) (local.get $ka) (local.get $tables)))))
        (local.set $kb (i8x16.swizzle (local.get $t0) (i8x16.sub (local.get $eb) (local.get $b0))))
        (if (i32.gt_u (local.get $tables) (i32.const 1))
          (then (local.set $kb (call $lookup_more (local.get $eb) (local.get $kb) (local.get $tables)))))
        (if (i32.eqz (i8x16.all_true (i8x16.min_u (local.get $ka) (local.get $kb))))
          (then (local.set $count (call $record_escapes (local.get $ea) (local.get $eb) (local.get $ka) (local.get $kb)
            (i32.shr_u (i32.sub (local.get $in) (local.get $in0)) (i32.const 1))
            (local.get $escIdx) (local.get $escExp) (local.get $count)))))
        ;; codes: (code + 1) - 1 saturating (escapes -> 0); as u16 lanes the low byte is the even
        ;; value's code, the high byte the odd one's: w | w >> 4 puts odd << 4 beside even.
        (local.set $ka (i8x16.sub_sat_u (local.get $ka) (local.get $one)))
        (local.set $kb (i8x16.sub_sat_u (local.get $kb) (local.get $one)))
        (local.set $codes (i8x16.narrow_i16x8_u
          (v128.and (v128.or (local.get $ka) (i16x8.shr_u (local.get $ka) (i32.const 4))) (local.get $mff))
          (v128.and (v128.or (local.get $kb) (i16x8.shr_u (local.get $kb) (i32.const 4))) (local.get $mff))))
        (v128.store (local.get $c) (local.get $codes))
        (if (local.get $hash)
          (then
            ;; Then swap each chain with its other-parity twin, so alternating groups feed
            ;; alternating chains. The twins wait in the scratch map (80..127), not in registers:
            ;; the loop holds more vectors than x64 has registers, and the spills cost more than
            ;; three loads and stores (6.45 -> 6.04 ns a group in cache, with the mask-free exponent).
            (local.set $hc (i32x4.mul (v128.or (i32x4.shl (local.tee $hc (i32x4.add (local.get $hc) (i32x4.mul (local.get $codes) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $hc) (i32.const 19))) (local.get $p1)))
            (local.set $hv (i32x4.mul (v128.or (i32x4.shl (local.tee $hv (i32x4.add (local.get $hv) (i32x4.mul (local.get $sa) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $hv) (i32.const 19))) (local.get $p1)))
            (local.set $hw (i32x4.mul (v128.or (i32x4.shl (local.tee $hw (i32x4.add (local.get $hw) (i32x4.mul (local.get $sb) (local.get $p2)))) (i32.const 13)) (i32x4.shr_u (local.get $hw) (i32.const 19))) (local.get $p1)))
            (local.set $sa (local.get $hc)) (local.set $hc (v128.load offset=80 (global.get $base))) (v128.store offset=80 (global.get $base) (local.get $sa))
            (local.set $sa (local.get $hv)) (local.set $hv (v128.load offset=96 (global.get $base))) (v128.store offset=96 (global.get $base) (local.get $sa))
            (local.set $sa (local.get $hw)) (local.set $hw (v128.load offset=112 (global.get $base))) (v128.store offset=112 (global.get $base) (local.get $sa))))
        (local.set $in (i32.add (local.get $in) (i32.const 64)))
        (local.set $c (i32.add (local.get $c) (i32.const 16)))
        (local.set $s (i32.add (local.get $s) (i32.const 32)))
        (br_if $next (i32.lt_u (local.get $in) (local.get $end)))))
    ;; After an odd number of groups the two parities' lane sets are exchanged (the JS side,
    ;; which knows the count, swaps them back).
    (v128.store offset=32 (global.get $base) (local.get $hc))
    (v128.store offset=48 (global.get $base) (local.get $hv))
    (v128.store offset=64 (global.get $base) (local.get $hw))
    (local.get $count))

  ;; Scalar path for a group with escapes: appends (index, exponent) for each lane whose code + 1 is 0.
  (func $record_escapes (param $ea v128) (param $eb v128) (param $ka v128) (param $kb v128)
      (param $base i32) (param $escIdx i32) (param $escExp i32) (param $count i32) (result i32)
    (local $lane i32)
    (v128.store offset=1536 (global.get $base) (local.get $ea))
    (v128.store offset=1552 (global.get $base) (local.get $eb))
    (v128.store offset=1568 (global.get $base) (local.get $ka))
    (v128.store offset=1584 (global.get $base) (local.get $kb))
    (loop $lanes
      (if (i32.eqz (i32.load8_u offset=1568 (i32.add (global.get $base) (local.get $lane))))
        (then
          (i32.store (i32.add (local.get $escIdx) (i32.shl (local.get $count) (i32.const 2)))
            (i32.add (local.get $base) (local.get $lane)))
          (i32.store8 (i32.add (local.get $escExp) (local.get $count)) (i32.load8_u offset=1536 (i32.add (global.get $base) (local.get $lane))))
          (local.set $count (i32.add (local.get $count) (i32.const 1)))))
      (local.set $lane (i32.add (local.get $lane) (i32.const 1)))
      (br_if $lanes (i32.lt_u (local.get $lane) (i32.const 32))))
    (local.get $count))

  ;; ---------------------------------------------------------------------------------------------
  ;; count_exponents: adds the exponent ((v >> 7) & 0xff) of each of $chunks x 4 u16 values at $in
  ;; ($chunks >= 1; any alignment) to four tables of 256 u32 counters at $hist, value j of every
  ;; four to table j: neighbours with one exponent then bump different counters, so the increments
  ;; do not wait on each other's stores. Counters wrap (mod 2^32), like the Uint32Array the JS side
  ;; sums them into. One 64-bit load per four values; (v >> 5) & 0x3fc is the counter's byte offset.
  ;; Measured on Zen 5 (V8): 4 tables of 4 values a loop 1.6x the JS loop; 8 tables and 8 values a
  ;; loop about 10% more, for 120 more bytes than the module's 4 KiB budget holds. Returns the end of the input.
  (func $count_exponents (export "count_exponents") (param $in i32) (param $chunks i32) (param $hist i32) (result i32)
    (local $end i32) (local $p i32) (local $x i64) (local $m i32)
    (local.set $m (i32.const 0x3fc))
    (local.set $end (i32.add (local.get $in) (i32.shl (local.get $chunks) (i32.const 3))))
    (loop $next
      (local.set $x (i64.load (local.get $in)))
        (i32.store (local.tee $p (i32.add (local.get $hist) (i32.and (i32.wrap_i64 (i64.shr_u (local.get $x) (i64.const 5))) (local.get $m))))
          (i32.add (i32.load (local.get $p)) (i32.const 1)))
        (i32.store offset=1024 (local.tee $p (i32.add (local.get $hist) (i32.and (i32.wrap_i64 (i64.shr_u (local.get $x) (i64.const 21))) (local.get $m))))
          (i32.add (i32.load offset=1024 (local.get $p)) (i32.const 1)))
        (i32.store offset=2048 (local.tee $p (i32.add (local.get $hist) (i32.and (i32.wrap_i64 (i64.shr_u (local.get $x) (i64.const 37))) (local.get $m))))
          (i32.add (i32.load offset=2048 (local.get $p)) (i32.const 1)))
        (i32.store offset=3072 (local.tee $p (i32.add (local.get $hist) (i32.and (i32.wrap_i64 (i64.shr_u (local.get $x) (i64.const 53))) (local.get $m))))
          (i32.add (i32.load offset=3072 (local.get $p)) (i32.const 1)))
      (br_if $next (i32.lt_u (local.tee $in (i32.add (local.get $in) (i32.const 8))) (local.get $end))))
    (local.get $in))
)
