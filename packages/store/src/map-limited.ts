// Runs a task over items with a few at once, as the S3 store's requests go (the transport keeps to
// its own request limit too: more in flight would only wait there).

/**
 * `task(item)` for each item, at most `limit` at once, results in the items' order. The first
 * failure stops new tasks from starting; the running ones are waited for, then it is thrown.
 */
export async function mapLimited<T, R>(items: readonly T[], limit: number, task: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  let failed: unknown;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length && failed === undefined) {
      const at = next++;
      try {
        out[at] = await task(items[at]!);
      } catch (error) {
        failed ??= error;
      }
    }
  });
  await Promise.all(workers);
  if (failed !== undefined) throw failed;
  return out;
}
