/** An ETag without quotes or a weak marker: LIST, HEAD and GET may quote it differently. */
export function normalizeEtag(etag: string): string {
  return etag.replace(/^W\//, '').replace(/^"(.*)"$/, '$1');
}
