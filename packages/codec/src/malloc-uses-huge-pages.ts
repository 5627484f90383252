// Where a Node process's large buffers fault cheaper: in a codec arena or in malloc'd memory.
// A codec arena is WebAssembly memory, which the engine maps itself, 4 KiB pages at a time. With
// glibc (>= 2.35) told to back its allocations with transparent huge pages, ordinary ArrayBuffers
// and SharedArrayBuffers fault 2 MiB at a time instead; where first touches are dear (~11 us a
// 4 KiB page on the VM measured), that outweighs the copies an arena saves. The builder's slab and
// the runtime's staging pools choose by this (their measurements are at those call sites).
// Pure: the caller passes the tunables (in Node, process.env.GLIBC_TUNABLES), so it runs anywhere.

/** True when `tunables` (a GLIBC_TUNABLES value) sets glibc.malloc.hugetlb to 1 or 2. */
export function mallocUsesHugePages(tunables: string | undefined): boolean {
  return /(^|:)glibc\.malloc\.hugetlb=[12](:|$)/.test(tunables ?? '');
}
