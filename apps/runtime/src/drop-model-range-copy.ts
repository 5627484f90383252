import type { ByteSource, ByteSourceObject, SafetensorsModel } from '@splitzip/safetensors';
import type { S3Object, S3ObjectSource } from '@splitzip/store';

/**
 * Drops this host's read-through copy of one range of one of a model's objects (S3Object.dropLocalCopy),
 * or, `damaged`, reports its bytes proven damaged (S3Object.reportDamage: bytes the source fetched make it
 * keep no more copies; bytes it served from a copy make it drop every copy it served and serve no more).
 */
type DropRangeCopy = (shardName: string, offsetBytes: number, lengthBytes: number, damaged: boolean) => Promise<void>;

/** Models openModel opened from an object store, with the way to their objects' local copies. */
const droppers = new WeakMap<SafetensorsModel, DropRangeCopy>();

/**
 * Drops the read-through copy of a tensor's range of `model`'s shard, so that the next raw read of
 * it fetches from the object store. False when the model has no such copies to drop (a local
 * model, one opened from a caller's ByteSource): a read again would return the same bytes.
 */
export async function dropModelRangeCopy(model: SafetensorsModel, shardName: string, offsetBytes: number, lengthBytes: number): Promise<boolean> {
  const drop = droppers.get(model);
  if (drop === undefined) return false;
  await drop(shardName, offsetBytes, lengthBytes, false);
  return true;
}

/**
 * dropModelRangeCopy for a range whose bytes were proven damaged (two reads differed, or a read
 * again gave the entry's bytes): fetched in this open, the model's object source also drops the
 * other ranges it kept in it and keeps no more; served from a local copy, it drops every copy it
 * served and serves no more (raw tensors with no entry have no check of their own, and came the
 * same way). Nothing to do for a model without such copies.
 */
export async function reportModelRangeDamage(model: SafetensorsModel, shardName: string, offsetBytes: number, lengthBytes: number): Promise<void> {
  await droppers.get(model)?.(shardName, offsetBytes, lengthBytes, true);
}

/** An object source whose objects are remembered by name, and whose reads are recorded until `stopRecording()`. */
export interface TrackedSource extends ByteSource {
  close(): Promise<void>;
  /** Drops the local copies of every range read since the source was made (or last dropped). */
  dropRecordedRanges(): Promise<void>;
  /** A body read through the source proved damaged: S3ObjectSource.reportDamage. */
  reportDamage(): Promise<void>;
  stopRecording(): void;
  /** Makes `model`'s tensor ranges droppable through dropModelRangeCopy. */
  attachModel(model: SafetensorsModel): void;
}

/**
 * Wraps an object source for openModel: the ranges an open reads (index, shard heads) are recorded,
 * so an open that fails to parse what it read drops their copies and reads them once more (a copy
 * of a GET body damaged in transit was otherwise kept, and failed every later open); the objects
 * are kept by name for the model's tensors (dropModelRangeCopy).
 */
export function trackSourceRanges(source: S3ObjectSource): TrackedSource {
  const objects = new Map<string, S3Object>();
  let recorded: { object: S3Object; offsetBytes: number; lengthBytes: number }[] | undefined = [];
  return {
    url: source.url,
    list: () => source.list(),
    async open(name): Promise<ByteSourceObject | undefined> {
      const object = await source.open(name);
      if (object === undefined) return undefined;
      objects.set(name, object);
      return {
        sizeBytes: object.sizeBytes,
        ...(object.etag !== undefined ? { etag: object.etag } : {}),
        readInto(offsetBytes, target) {
          recorded?.push({ object, offsetBytes, lengthBytes: target.length });
          return object.readInto(offsetBytes, target);
        },
      };
    },
    close: () => source.close(),
    async dropRecordedRanges() {
      const ranges = recorded ?? [];
      if (recorded !== undefined) recorded = [];
      await Promise.all(ranges.map(({ object, offsetBytes, lengthBytes }) => object.dropLocalCopy(offsetBytes, lengthBytes)));
    },
    reportDamage: () => source.reportDamage(),
    stopRecording() {
      recorded = undefined;
    },
    attachModel(model) {
      droppers.set(model, async (shardName, offsetBytes, lengthBytes, damaged) => {
        const object = objects.get(shardName);
        await (damaged ? object?.reportDamage(offsetBytes, lengthBytes) : object?.dropLocalCopy(offsetBytes, lengthBytes));
      });
    },
  };
}
