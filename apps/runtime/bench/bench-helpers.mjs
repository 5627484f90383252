// Helpers shared by the runtime's benchmark scripts.

/** The value after `flag` on the command line (`--rounds 7`), or `fallback`. */
export function argValue(flag, fallback) {
  const args = process.argv.slice(2);
  const i = args.indexOf(flag);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
}

/** The median of `xs` (the mean of the middle two for an even count). */
export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}
