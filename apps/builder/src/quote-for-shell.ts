/**
 * `'./my model'` for `./my model`: a path as a shell reads it back, in a command line a message or
 * report suggests to copy (plain where no character of it is special to a shell). Unquoted, a
 * path with a space became two arguments (`--out /tmp/empty dir`).
 */
export function quoteForShell(path: string): string {
  // `-x` read as an option, quoted or not (build rejects it): `./-x` is the same relative path.
  if (path.startsWith('-')) return quoteForShell(`./${path}`);
  return /^[\w./:@%+=,-]+$/.test(path) ? path : `'${path.replaceAll("'", "'\\''")}'`;
}
