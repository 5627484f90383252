// Whether this process's malloc backs large buffers with transparent huge pages: glibc >= 2.35
// started with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (or 2). Buffers from malloc (ArrayBuffer,
// SharedArrayBuffer) then fault in 2 MiB at a time; WebAssembly memory, which V8 maps itself, still
// faults 4 KiB at a time (~11 us each on the VM measured). First loads of a fresh process there,
// 2026-12-04, with `hugetlb=1:mmap_threshold=33554432:arena_max=1` (the top README has the why),
// staging pool in a codec arena against a plain shared buffer, 2 alternating runs each: 1.07 GB
// model 668-901 against 478-515 ms, default model 71-86 against 40-45 ms; later loads in the same
// process equal (300-335 against 307-310 ms, 13.4-14.3 against 13.0-15.7 ms). Without the tunable
// the arena stays: later loads 537-676 against 650-709 ms, 15.3-16.4 against 17.3-18.3 ms.

/** True when `tunables` (default: this process's GLIBC_TUNABLES) asks glibc's malloc for huge pages. */
export function mallocUsesHugePages(tunables: string | undefined = process.env.GLIBC_TUNABLES): boolean {
  return /(^|:)glibc\.malloc\.hugetlb=[12](:|$)/.test(tunables ?? '');
}
