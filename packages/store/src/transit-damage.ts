/**
 * Bodies found damaged, per S3 endpoint, in this process. A GET body damaged on the way (right
 * length, wrong bytes: a faulty proxy or NIC on a plain-`http` path) can be caught only where some
 * check covers it (a cache blob's checksum, a whole object's MD5 ETag, a reader's own check); a raw
 * range of an object has none. So one caught body is taken as evidence against every body from the
 * same endpoint: an object source that kept read-through ranges of it drops them and keeps no more
 * (openS3ObjectSource). Counts only grow: a source compares with the count when it opened.
 */
const damageByEndpoint = new Map<string, number>();

/** Notes a body from `endpoint` found damaged (or a local copy of one). */
export function reportTransitDamage(endpoint: string): void {
  damageByEndpoint.set(endpoint, (damageByEndpoint.get(endpoint) ?? 0) + 1);
}

/** How many bodies from `endpoint` were found damaged in this process so far. */
export function countTransitDamage(endpoint: string): number {
  return damageByEndpoint.get(endpoint) ?? 0;
}
