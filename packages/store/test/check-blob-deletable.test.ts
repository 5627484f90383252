// checkBlobDeletable's outcomes and look order (README "S3 layout", Removing entries, steps 6 and 9),
// on a stand-in transport: objects by name with their Last-Modified, every call logged.
import { describe, expect, it } from 'vitest';
import { checkBlobDeletable, type BlobLookTransport } from '../src/check-blob-deletable.js';
import { blobObjectName, dropIntentObjectName, entryObjectName } from '../src/s3-layout.js';

const KEY = 'a'.repeat(40);
const SHA = 'b'.repeat(64);
const ENTRY = entryObjectName(KEY, SHA);
const BLOB = blobObjectName(KEY, SHA);
const OWN = dropIntentObjectName(ENTRY, '0123456789ab');
const OTHER = dropIntentObjectName(ENTRY, 'ba9876543210');
const NOW_MS = 1_900_000_000_000;
const MIN_AGE_MS = 60 * 60 * 1000;

/** A stand-in S3: `objects` name → Last-Modified; `onCall` runs after each call is logged, before it answers. */
function standIn(objects: Map<string, number>, onCall: (call: string) => void = () => {}): { transport: BlobLookTransport; calls: string[] } {
  const calls: string[] = [];
  const log = (call: string): void => {
    calls.push(call);
    onCall(call);
  };
  const transport: BlobLookTransport = {
    headObject: async (name) => {
      log(`head ${name}`);
      const lastModifiedMs = objects.get(name);
      return lastModifiedMs === undefined ? undefined : { sizeBytes: 1, sizeKnown: true, etag: undefined, lastModifiedMs };
    },
    list: async (dir) => {
      log(`list ${dir}`);
      return [...objects].filter(([name]) => name.startsWith(dir)).map(([name, lastModifiedMs]) => ({ name, sizeBytes: 1, lastModifiedMs, etag: undefined }));
    },
    judgingNowMs: () => NOW_MS,
  };
  return { transport, calls };
}

const OLD_MS = NOW_MS - MIN_AGE_MS;
const INTENTS = `list ${ENTRY.replace('entries/', 'dropping/')}.`;
const ALL_LOOKS = [`head ${ENTRY}`, INTENTS, `head ${ENTRY}`, `head ${BLOB}`];

describe('checkBlobDeletable', () => {
  it('looks at the entry, the intents, the entry again and the blob last: an old blob with none of them is deletable', async () => {
    const { transport, calls } = standIn(new Map([[BLOB, OLD_MS]]));
    expect(await checkBlobDeletable(transport, ENTRY, undefined, MIN_AGE_MS)).toEqual({ outcome: 'deletable', blob: expect.objectContaining({ lastModifiedMs: OLD_MS }) });
    expect(calls).toEqual(ALL_LOOKS);
  });

  it('an entry object present at the first look: entry-present, nothing more looked at', async () => {
    const { transport, calls } = standIn(new Map([[ENTRY, OLD_MS], [BLOB, OLD_MS]]));
    expect(await checkBlobDeletable(transport, ENTRY, undefined, MIN_AGE_MS)).toEqual({ outcome: 'entry-present' });
    expect(calls).toEqual([`head ${ENTRY}`]);
  });

  it('an entry put back (and its intent removed) during the intent look: entry-present at the second entry look', async () => {
    const objects = new Map([[BLOB, OLD_MS]]);
    const { transport, calls } = standIn(objects, (call) => {
      if (call === INTENTS) objects.set(ENTRY, NOW_MS);
    });
    expect(await checkBlobDeletable(transport, ENTRY, undefined, MIN_AGE_MS)).toEqual({ outcome: 'entry-present' });
    expect(calls).toEqual(ALL_LOOKS.slice(0, 3));
  });

  it('without an own intent (gc), any intent of the entry: intent-held, the blob not looked at', async () => {
    const { transport, calls } = standIn(new Map([[OTHER, OLD_MS], [BLOB, OLD_MS]]));
    expect(await checkBlobDeletable(transport, ENTRY, undefined, MIN_AGE_MS)).toEqual({ outcome: 'intent-held' });
    expect(calls).toEqual(ALL_LOOKS.slice(0, 2));
  });

  it("with an own intent (a drop): its own alone lets it on; another drop's beside it, or its own gone, is intent-held", async () => {
    const ownAlone = standIn(new Map([[OWN, OLD_MS], [BLOB, OLD_MS]]));
    expect((await checkBlobDeletable(ownAlone.transport, ENTRY, OWN, MIN_AGE_MS)).outcome).toBe('deletable');
    const another = standIn(new Map([[OWN, OLD_MS], [OTHER, OLD_MS], [BLOB, OLD_MS]]));
    expect(await checkBlobDeletable(another.transport, ENTRY, OWN, MIN_AGE_MS)).toEqual({ outcome: 'intent-held' });
    const taken = standIn(new Map([[BLOB, OLD_MS]]));
    expect(await checkBlobDeletable(taken.transport, ENTRY, OWN, MIN_AGE_MS)).toEqual({ outcome: 'intent-held' });
  });

  it('an object below the intent prefix that is no intent name counts as none', async () => {
    const { transport } = standIn(new Map([[`${OTHER}.tmp`, OLD_MS], [BLOB, OLD_MS]]));
    expect((await checkBlobDeletable(transport, ENTRY, undefined, MIN_AGE_MS)).outcome).toBe('deletable');
  });

  it('a blob absent at the last look: gone', async () => {
    const { transport, calls } = standIn(new Map());
    expect(await checkBlobDeletable(transport, ENTRY, undefined, MIN_AGE_MS)).toEqual({ outcome: 'gone' });
    expect(calls).toEqual(ALL_LOOKS);
  });

  it('a blob stored again during the earlier looks is young at the last one (its age is looked at last)', async () => {
    const objects = new Map([[BLOB, OLD_MS]]);
    const { transport, calls } = standIn(objects, (call) => {
      if (call === INTENTS) objects.set(BLOB, NOW_MS - 1);
    });
    expect(await checkBlobDeletable(transport, ENTRY, undefined, MIN_AGE_MS)).toEqual({ outcome: 'young', blob: expect.objectContaining({ lastModifiedMs: NOW_MS - 1 }) });
    expect(calls).toEqual(ALL_LOOKS);
  });

  it('a blob exactly minAgeMs old is deletable, one a millisecond younger is young', async () => {
    const exactly = standIn(new Map([[BLOB, OLD_MS]]));
    expect((await checkBlobDeletable(exactly.transport, ENTRY, undefined, MIN_AGE_MS)).outcome).toBe('deletable');
    const younger = standIn(new Map([[BLOB, OLD_MS + 1]]));
    expect((await checkBlobDeletable(younger.transport, ENTRY, undefined, MIN_AGE_MS)).outcome).toBe('young');
  });
});
