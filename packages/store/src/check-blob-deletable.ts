// The looks before a blob DELETE on an s3:// cache (README "S3 layout", Removing entries, steps 6
// and 9): one function for the drop's dropped blobs and gc's orphan blobs, so that their order
// cannot drift apart.
import { blobObjectName, dropIntentPrefix, parseDropIntentObjectName, parseEntryObjectName } from './s3-layout.js';
import type { HeadedObject, S3Transport } from './s3-transport.js';

/** The transport calls checkBlobDeletable makes (a stand-in can serve them in tests). */
export type BlobLookTransport = Pick<S3Transport, 'headObject' | 'list' | 'judgingNowMs'>;

/**
 * What checkBlobDeletable found: the first look that said no, else 'deletable'.
 * - 'entry-present': the entry object exists (at the first look or at the look after the intents);
 * - 'intent-held': the entry's intents are not `ownIntent` alone (another drop may put it back), or
 *   `ownIntent` is gone (a resolver took it: the caller's verdict is stale); without `ownIntent`, any intent;
 * - 'gone': the blob is absent already;
 * - 'young': the blob is younger than `minAgeMs` (a writer stored it again);
 * - 'deletable': none of those; `blob` is what the last look saw.
 */
export type BlobDeletableOutcome =
  | { outcome: 'entry-present' }
  | { outcome: 'intent-held' }
  | { outcome: 'gone' }
  | { outcome: 'young'; blob: HeadedObject }
  | { outcome: 'deletable'; blob: HeadedObject };

/**
 * Looks, in this order, at the entry object `entryName`, the drop intents naming it, the entry
 * object again (a drop that put it back and removed its intent between those two looks), and LAST,
 * right before the caller's DELETE, the blob's age: a writer's blob PUT before that look is seen
 * (young); only one inside the round trip left, its entry PUT after the entry looks, is lost
 * (window (c)). Stops at the first look that says no. Run it before each DELETE attempt
 * (S3Transport.deleteObject's `beforeAttempt`). `ownIntent`: the caller's own intent object of the
 * entry (a drop or resolver), undefined for gc.
 */
export async function checkBlobDeletable(transport: BlobLookTransport, entryName: string, ownIntent: string | undefined, minAgeMs: number): Promise<BlobDeletableOutcome> {
  const parsed = parseEntryObjectName(entryName)!;
  if ((await transport.headObject(entryName)) !== undefined) return { outcome: 'entry-present' };
  if (!(await intentsAllowBlobDelete(transport, entryName, ownIntent))) return { outcome: 'intent-held' };
  if ((await transport.headObject(entryName)) !== undefined) return { outcome: 'entry-present' };
  const blob = await transport.headObject(blobObjectName(parsed.key, parsed.blobSha256));
  if (blob === undefined) return { outcome: 'gone' };
  const deletable = transport.judgingNowMs() - blob.lastModifiedMs >= minAgeMs;
  return deletable ? { outcome: 'deletable', blob } : { outcome: 'young', blob };
}

/** Whether the intents of `entryName` are `ownIntent` alone (present), or none when `ownIntent` is undefined. */
async function intentsAllowBlobDelete(transport: BlobLookTransport, entryName: string, ownIntent: string | undefined): Promise<boolean> {
  const names = (await transport.list(dropIntentPrefix(entryName))).map((object) => object.name).filter((name) => parseDropIntentObjectName(name) !== undefined);
  return ownIntent === undefined ? names.length === 0 : names.length === 1 && names[0] === ownIntent;
}
