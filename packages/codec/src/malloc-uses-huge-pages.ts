// Where a Node process's large buffers fault cheaper: in a codec arena or in malloc'd memory.
// A codec arena is WebAssembly memory, which the engine maps itself, 4 KiB pages at a time. With
// glibc (>= 2.35) told to back its allocations with transparent huge pages, ordinary ArrayBuffers
// and SharedArrayBuffers fault 2 MiB at a time instead; where first touches are dear (~11 us a
// 4 KiB page on the VM measured), that outweighs the copies an arena saves. The builder's slab and
// the runtime's staging pools choose by this (their measurements are at those call sites).
// Pure: the caller passes the tunables (in Node, process.env.GLIBC_TUNABLES), so it runs anywhere.

/**
 * A tunable value that glibc's _dl_strtoul reads as 1 or 2 (the digit captured): spaces or tabs, a
 * '+', leading zeros (octal) or 0x (hex) allowed; nothing may follow the digits.
 */
const ONE_OR_TWO = /^[ \t]*\+?(?:0*|0[xX]0*)([12])$/;

/** Whether `value` reads as the number `digit` to glibc. */
function readsAs(value: string | undefined, digit: '1' | '2'): boolean {
  return value !== undefined && ONE_OR_TWO.exec(value)?.[1] === digit;
}

/**
 * The values GLIBC_TUNABLES gives, by name, read as glibc >= 2.39 reads it (elf/dl-tunables.c,
 * parse_tunables_string): `name=value` pairs separated by ':' (a part without '=' before its ':'
 * is skipped); a repeated name keeps its last value; the whole string is ignored (null) when a
 * value holds '=' or the string ends in a part without '=' (a trailing ':' included).
 */
function parseTunables(tunables: string): Map<string, string> | null {
  const values = new Map<string, string>();
  if (tunables === '') return values;
  let at = 0;
  for (;;) {
    const nameEnd = findSeparator(tunables, at);
    if (nameEnd === tunables.length) return null;
    if (tunables[nameEnd] === ':') {
      at = nameEnd + 1;
      continue;
    }
    const valueEnd = findSeparator(tunables, nameEnd + 1);
    if (tunables[valueEnd] === '=') return null;
    values.set(tunables.slice(at, nameEnd), tunables.slice(nameEnd + 1, valueEnd));
    if (valueEnd === tunables.length) return values;
    // At the ':': the next round skips it, as glibc's loop does.
    at = valueEnd;
  }
}

/** The first '=' or ':' at or after `from`, or the string's length. */
function findSeparator(text: string, from: number): number {
  let at = from;
  while (at < text.length && text[at] !== '=' && text[at] !== ':') at++;
  return at;
}

/**
 * True when `tunables` (a GLIBC_TUNABLES value) sets glibc.malloc.hugetlb to 1 or 2, as glibc
 * reads the string: the last setting counts (`hugetlb=1:hugetlb=0` is off), and an ill-formed
 * string, or glibc.rtld.enable_secure=1 in it, makes glibc ignore every tunable it sets.
 */
export function mallocUsesHugePages(tunables: string | undefined): boolean {
  const values = typeof tunables === 'string' ? parseTunables(tunables) : null;
  if (values === null || readsAs(values.get('glibc.rtld.enable_secure'), '1')) return false;
  const hugetlb = values.get('glibc.malloc.hugetlb');
  return readsAs(hugetlb, '1') || readsAs(hugetlb, '2');
}
