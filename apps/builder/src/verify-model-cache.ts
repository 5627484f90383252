// Checks a cache against a model: every tensor is found by its slice key and by its content key
// and decodes bit-identical to the file, or is not cached for a stated reason (not BF16, below the
// coverage gate, too large, a payload no smaller than its raw bytes). Anything else (missing, unaliased, bound to other bytes, corrupt,
// different bytes) is a failure.
import { checkKnownOptions, optionNamesOf } from './check-known-options.js';
import { calibrateFromHistogram, computePayloadLayout, readEscapeStreams, readPayloadMeta, validatePayloadStructure } from '@splitzip/codec';
import { formatCoverage } from '@splitzip/codec/internal';
import { MAX_BUFFER_BYTES, parseFileStamp, readTensorBytes, type SafetensorsModel, type TensorInfo } from '@splitzip/safetensors';
import { classifyBinding, isS3Url, isSliceStampKept, MAX_SLICE_KEYS_PER_ENTRY, MAX_SLICE_STAMPS, shardStampKind, type CacheEntry, type CacheStore } from '@splitzip/store';
import { describeModelObjectChanged, openBuilderModel } from './open-builder-model.js';
import { createTensorBlockReader, type TensorBlockReader } from './create-tensor-block-reader.js';
import { describeError } from './describe-error.js';
import { BuilderError } from './errors.js';
import { isCacheableSize, TOO_LARGE_REASON, VERIFY_BLOCK_BYTES } from './limits.js';
import { canPayloadShrink, describeNoGain, isPayloadSmaller } from './check-payload-gain.js';
import { isOtherFilesBinding, isOtherObjectsBinding } from './judge-slice-bindings.js';
import { scanTensorBlocks, type DecodedComparison, type ScanBuffers, type TensorScan } from './scan-tensor-blocks.js';
import { throwIfInterrupted } from './throw-if-interrupted.js';
import { formatCount } from './format-units.js';
import { bf16ValueCount } from './tensor-tasks.js';

export type ModelTensorStatus = 'ok' | 'not_cached' | 'failed';

/** Why a tensor cached by content key with its slice bound to nothing fails, and what binds it (a build aliases it: no blob written). */
export const UNBOUND_REASON =
  'in the cache by content key, but its slice key is not aliased (a renamed shard, a tensor moved within its shard, or a build stopped before binding it): run build, which binds it and writes no blob';

export interface ModelTensorCheck {
  name: string;
  dtype: string;
  shard: string;
  offsetBytes: number;
  sizeBytes: number;
  key: string | null;
  status: ModelTensorStatus;
  /** Why it is not cached (dtype, coverage, size) or what failed. */
  reason: string | null;
  /** True where it failed because its shard file changed since its slice was bound (the text report groups these per shard). */
  stale?: true;
  /**
   * True where it failed because its slice is bound for another revision of its s3:// shard object
   * (another ETag) only: no damage, that revision's binding stays, and a plain build of this one
   * binds it beside (the text report groups these per shard and names the build). Not `stale`.
   */
  otherRevision?: true;
  /**
   * True where it failed because its bytes are cached (by content key) but its slice key is bound
   * to no entry: a renamed shard, tensors moved within one, a build stopped before binding it. A
   * plain build binds it, writing no blob (the text report groups these per shard and names it).
   */
  unbound?: true;
  /**
   * True where it is ok, but its slice's binding has no record of this shard file (a copy, a touched
   * file, a cache built before 2026-12-05): the bytes are the entry's, so the runtime serves it from
   * the cache after checking it once (a raw read and a hash), and a build records it now. `reason`
   * says so (the text report groups these per shard).
   */
  unrecorded?: true;
  /**
   * True beside `unrecorded` where no load or build records the file: its binding holds the stamps
   * of MAX_SLICE_STAMPS files changed after it (the files changed most recently keep the slots,
   * isSliceStampKept), so every new process checks it once. Since 2026-12-07.
   */
  stampNotKept?: true;
  /**
   * Where it failed because the cache decodes other values than the file holds: the first value
   * that differs (`index`, of the tensor's values) and its byte offset in the tensor.
   */
  firstDifference?: { index: number; offsetBytes: number };
}

/**
 * `12582912 bytes, modified 2026-12-05T06:12:07.340Z, inode 1234 changed 2026-12-05T06:12:07.352Z`
 * for a shard stamp `<size>:<mtime ns>:<ctime ns>:<inode>` (before 2026-12-05: `<size>:<mtime ns>`,
 * no inode part); other forms as they are.
 */
export function describeStamp(stamp: string): string {
  const fields = parseFileStamp(stamp);
  if (!fields) return stamp;
  const isoOf = (ns: string) => {
    const date = new Date(Number(BigInt(ns) / 1_000_000n));
    return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
  };
  const modified = isoOf(fields.mtimeNs);
  const changed = fields.ctimeNs === undefined ? undefined : isoOf(fields.ctimeNs);
  if (modified === undefined || (fields.ctimeNs !== undefined && changed === undefined)) return stamp;
  return `${fields.size} bytes, modified ${modified}${changed === undefined ? '' : `, inode ${fields.inode} changed ${changed}`}`;
}

/** What a binding's stamps say of the shard it was recorded against, for a stale binding's reason. */
function describeRecorded(stamps: readonly string[]): string {
  if (stamps.length === 0) return 'recorded without a shard stamp';
  if (stamps.every((stamp) => shardStampKind(stamp) === 'file')) return `recorded when the shard file was ${stamps.map(describeStamp).join(' or ')}`;
  return `recorded against ${stamps.map(describeStamp).join(', ')}`;
}

export interface ModelCheckReport {
  model: string;
  ok: boolean;
  coverageMin: number;
  tensors: ModelTensorCheck[];
  totals: { tensors: number; ok: number; not_cached: number; failed: number; checked_bytes: number };
}

export interface VerifyModelCacheOptions {
  /**
   * Tensors below this Top-16 coverage are expected to be absent: the cache's gate, or one above
   * it (a gate below the cache's is refused, USAGE: no build into this cache stores those tensors).
   */
  coverageMin: number;
  /**
   * Judge as a build --skip-no-gain decides (a tensor whose payload would not be smaller than its
   * raw bytes is `not_cached`); without it, as a default build, which caches such a tensor if it
   * passes the gate (one not cached is `missing`). The cache records neither.
   */
  skipNoGain?: boolean | undefined;
  signal?: AbortSignal | undefined;
  onProgress?: ((event: { doneBytes: number; totalBytes: number; tensor: string }) => void) | undefined;
  /**
   * Bytes of a tensor read, hashed, decoded and compared at a time (VERIFY_BLOCK_BYTES). For tests,
   * which exercise the blocked path on small tensors: a positive even integer.
   */
  blockBytes?: number | undefined;
}

const VERIFY_MODEL_CACHE_OPTIONS = optionNamesOf<VerifyModelCacheOptions>({ coverageMin: true, skipNoGain: true, signal: true, onProgress: true, blockBytes: true });

export async function verifyModelCache(store: CacheStore, modelPath: string, options: VerifyModelCacheOptions): Promise<ModelCheckReport> {
  checkKnownOptions(options, VERIFY_MODEL_CACHE_OPTIONS, 'verifyModelCache');
  const blockBytes = options.blockBytes ?? VERIFY_BLOCK_BYTES;
  if (!Number.isSafeInteger(blockBytes) || blockBytes < 2 || blockBytes % 2 !== 0) {
    throw new BuilderError('USAGE', `blockBytes must be a positive even integer, got ${String(blockBytes)}`);
  }
  // Under the cache's gate, tensors between the two would be "missing: run build", but no build
  // into this cache stores them (a build with that gate is refused, SETTINGS_MISMATCH).
  if (typeof options.coverageMin === 'number' && options.coverageMin < store.coverageMin) {
    throw new BuilderError(
      'USAGE',
      `coverageMin ${options.coverageMin} is below the cache's gate: the cache gates at ${store.coverageMin}, and no build into it stores a tensor under that (a build with another gate is refused: SETTINGS_MISMATCH); judge by the cache's gate (leave --coverage-min out), or by one above it`,
      { file: store.root },
    );
  }
  const { model, openObject } = await openBuilderModel(modelPath, { verb: 'verify', ...(options.signal ? { signal: options.signal } : {}) });
  const reader = createTensorBlockReader(model, openObject);
  try {
    const tensors = model.tensors;
    const isChecked = (t: (typeof tensors)[number]) => t.dtype === 'BF16' && isCacheableSize(t.slice.sizeBytes);
    const totalBytes = tensors.reduce((sum, t) => sum + (isChecked(t) ? t.slice.sizeBytes : 0), 0);
    // Blocks of the file's bytes and of decoded values, sized once: a tensor larger than a block is
    // gone through a block at a time. The blob's buffer grows to the payloads of this model's
    // tensors only: sized from every entry, one entry of another model (or a damaged manifest's)
    // decided the allocation, up to a RangeError.
    let largestRaw = 0;
    for (const t of tensors) if (isChecked(t)) largestRaw = Math.max(largestRaw, t.slice.sizeBytes);
    const block = Math.min(largestRaw, blockBytes);
    // The second file block only serves the read-ahead of a tensor of several blocks.
    const buffers: ScanBuffers = {
      file: [new Uint8Array(block), new Uint8Array(largestRaw > blockBytes ? block : 0)],
      decoded: new Uint16Array(block / 2),
    };
    const blobSlot = { bytes: new Uint8Array(0) };
    const held = { tensor: undefined as TensorInfo | undefined };

    const checks: ModelTensorCheck[] = [];
    let doneBytes = 0;
    for (const tensor of tensors) {
      throwIfInterrupted(options.signal);
      const context: CheckContext = {
        store,
        model,
        reader,
        coverageMin: options.coverageMin,
        skipNoGain: options.skipNoGain === true,
        blockBytes,
        buffers,
        blobSlot,
        held,
        signal: options.signal,
        // Progress within a tensor too: a 4 GiB one is minutes of a still bar otherwise.
        onBlock: (tensorDoneBytes) => options.onProgress?.({ doneBytes: doneBytes + tensorDoneBytes, totalBytes, tensor: tensor.name }),
      };
      const check = await checkTensor(context, tensor);
      checks.push(check);
      if (isChecked(tensor)) doneBytes += tensor.slice.sizeBytes;
      options.onProgress?.({ doneBytes, totalBytes, tensor: tensor.name });
    }
    const count = (status: ModelTensorStatus): number => checks.filter((c) => c.status === status).length;
    return {
      model: modelPath,
      ok: count('failed') === 0,
      coverageMin: options.coverageMin,
      tensors: checks,
      totals: { tensors: checks.length, ok: count('ok'), not_cached: count('not_cached'), failed: count('failed'), checked_bytes: doneBytes },
    };
  } finally {
    await reader.close();
    await model.close();
  }
}

interface CheckContext {
  store: CacheStore;
  model: SafetensorsModel;
  reader: TensorBlockReader;
  coverageMin: number;
  skipNoGain: boolean;
  blockBytes: number;
  buffers: ScanBuffers;
  blobSlot: { bytes: Uint8Array };
  /** The tensor whose bytes the first file block holds whole, if any. */
  held: { tensor: TensorInfo | undefined };
  signal: AbortSignal | undefined;
  onBlock(doneBytes: number): void;
}

/** Whether an entry's manifest sizes describe a tensor of `sizeBytes` (a damaged one's must not size a buffer). */
function entryFits(entry: CacheEntry, sizeBytes: number): boolean {
  return entry.meta.elementCount === sizeBytes / 2 && entry.compBytes <= MAX_BUFFER_BYTES;
}

/** The entry's payload read by the store (header, manifest and checksum checked), or why it could not be. */
async function readPayload(context: CheckContext, entry: CacheEntry): Promise<{ payload: Uint8Array } | { error: unknown }> {
  if (context.blobSlot.bytes.length < entry.compBytes) context.blobSlot.bytes = new Uint8Array(entry.compBytes);
  try {
    return { payload: await context.store.readBlob(entry.key, context.blobSlot.bytes) };
  } catch (error) {
    return { error };
  }
}

async function checkTensor(context: CheckContext, tensor: TensorInfo): Promise<ModelTensorCheck> {
  const { store, model, coverageMin, skipNoGain } = context;
  const { shardName, offsetBytes, sizeBytes } = tensor.slice;
  const base = { name: tensor.name, dtype: tensor.dtype, shard: shardName, offsetBytes, sizeBytes };
  // As the runtime (classifyBinding): a binding with no record of this shard file (other files'
  // stamps, stamps of the old form, none at all) is used only for bytes checked to be its entry's
  // (the runtime reads and hashes them once).
  // This file's binding where the slice holds one per file (FILE-BINDINGS.md: the one whose stamps
  // hold its stamp), else the latest, as a load looks it up.
  const fileStamp = model.shards.find((shard) => shard.name === shardName)?.stamp ?? null;
  const binding = store.lookupSliceBinding(shardName, offsetBytes, sizeBytes, fileStamp);
  const unrecordedFile = binding !== undefined && fileStamp !== null && classifyBinding(binding, fileStamp) !== 'trusted';
  let bySlice = unrecordedFile ? undefined : binding?.entry;
  if (tensor.dtype !== 'BF16' || !isCacheableSize(sizeBytes)) {
    const reason = tensor.dtype !== 'BF16' ? `dtype ${tensor.dtype} is not BF16` : TOO_LARGE_REASON;
    // A zero-byte slice is shared by every empty tensor at that offset (older builds bound it to one).
    if (bySlice && sizeBytes > 0) return { ...base, key: null, status: 'failed', reason: `its slice key is bound to entry ${bySlice.key}, but ${reason}` };
    return { ...base, key: null, status: 'not_cached', reason };
  }

  // The decode below is reached only for the entry this slice is bound to (trusted, or found to
  // hold these very bytes), so that entry's payload is decoded and compared in the same pass as
  // the bytes are hashed: each block of the file is read once. Without a binding the tensor is
  // most likely below the gate: its histogram is taken in that pass instead.
  const candidate = sizeBytes > 0 && binding !== undefined && entryFits(binding.entry, sizeBytes) ? binding.entry : undefined;
  const candidateRead = candidate === undefined ? undefined : await readPayload(context, candidate);
  const scan = await scanTensor(context, tensor, {
    histogram: candidate === undefined,
    payload: candidateRead !== undefined && 'payload' in candidateRead ? candidateRead.payload : undefined,
  });
  const key = scan.key;
  // The check the runtime makes at the first load, made here: the bytes are the bound entry's.
  // As the runtime, against every binding of the slice (one per file): a copy of another file bound here is served too.
  const matching = !unrecordedFile || sizeBytes === 0 ? undefined : binding.entry.key === key ? binding : store.lookupSliceBindings(shardName, offsetBytes, sizeBytes).find((other) => other.entry.key === key);
  const unrecorded = matching !== undefined;
  if (unrecorded) bySlice = matching.entry;
  const stale = unrecordedFile && !unrecorded;
  const byKey = store.getEntry(key);
  // Bound for another ETag of this s3:// shard object only: another revision's binding, which
  // stays (a build of this revision binds beside it, FILE-BINDINGS.md phase 3), not bytes changed
  // under a binding of this one. Still a failure: a load of this revision reads these raw.
  const otherObject = stale && sizeBytes > 0 && isOtherObjectsBinding(binding!.stamps, fileStamp);
  // The file holds other bytes than the entry its slice is bound to, and the binding has no record of it.
  const staleFailure = (): ModelTensorCheck =>
    otherObject
      ? {
          ...base,
          key,
          status: 'failed',
          reason: `not bound for this revision of the object (${describeStamp(fileStamp!)}): its slice is bound to entry ${binding!.entry.key} for another revision (${describeRecorded(binding!.stamps)}), which stays${byKey ? `; its bytes are in the cache as ${key}` : ''}: run build of this revision, which binds it beside the other`,
          otherRevision: true,
        }
      : {
          ...base,
          key,
          status: 'failed',
          reason: `its slice is bound to entry ${binding!.entry.key}, ${describeRecorded(binding!.stamps)}, and it is ${fileStamp === null ? 'unknown' : describeStamp(fileStamp)} now and holds other bytes (changed, or another model's${byKey ? `; they are in the cache as ${key}` : ''}): run build --rebind`,
          stale: true,
        };
  if (bySlice && bySlice.key !== key && sizeBytes > 0) {
    return { ...base, key, status: 'failed', reason: `slice key bound to entry ${bySlice.key}, but the file now holds ${key} (shard changed since the build?): run build --rebind` };
  }
  if (!byKey) {
    // Taken in the scan, or (a binding to other bytes) in a second pass.
    const histogram = scan.histogram ?? (await scanTensor(context, tensor, { histogram: true })).histogram!;
    const { coverage, escapeCount } = calibrateFromHistogram(histogram);
    // Before the reasons a build skips it for: a binding of its slice to other bytes is served to
    // every reader that checks no stamps, and `build --rebind` removes it (it hid behind the skip).
    // Not one recorded only with other files of this shard name (another model's, as
    // text_encoder and text_encoder_2): that model's binding, which a directory cache keeps beside
    // this file's (one binding per file, 0.56) and no build of this one removes.
    // The build's rule (isOtherFilesBinding): one stamp of another inode is enough, as no build of
    // this file removes such a binding (one recorded with a copy's file before it changed in place too).
    // Likewise another revision's object binding (otherObject): no build of this one removes it.
    const otherFile = otherObject || (stale && sizeBytes > 0 && isOtherFilesBinding(binding!.stamps, fileStamp));
    const skipped = (reason: string): ModelTensorCheck => ({
      ...base,
      key,
      status: 'not_cached',
      reason: otherObject
        ? `${reason}; its slice is bound to entry ${binding!.entry.key} for another revision of object ${shardName} (${describeRecorded(binding!.stamps)}): that revision's, kept`
        : otherFile
          ? `${reason}; its slice is bound to entry ${binding!.entry.key} from another file of shard name ${shardName} (${describeRecorded(binding!.stamps)}): another revision's or model's, kept; or this model's shard before it was replaced by a new file (a download), which stays until newer files' bindings of the slice push it out`
          : reason,
    });
    const shrinks = canPayloadShrink(sizeBytes, store.chunkSize);
    // The build's order (build-cache.ts, analyze-model.ts judgeBf16Tensor): with --skip-no-gain, no
    // payload of it can shrink (skipped unread), the gate, then its escapes; a default build: the gate.
    if (skipNoGain && !shrinks) {
      const underGate = coverage < coverageMin ? `; its Top-16 coverage ${formatCoverage(coverage, 6)} < ${coverageMin} too (what a build without it skips it for)` : '';
      return stale && !otherFile ? staleFailure() : skipped(`${describeNoGain(sizeBytes, 0, store.chunkSize)}${underGate}`);
    }
    if (coverage < coverageMin) {
      // As a default build names it (skipped_coverage), and the runtime with its bytes (`coverage`).
      // A sentence: `…, and it would not shrink either (…)` (it ended `…raw bytes too`).
      const noGain = shrinks ? '' : `, and it would not shrink either (${describePayloadSize(sizeBytes, store.chunkSize)})`;
      return stale && !otherFile ? staleFailure() : skipped(`Top-16 coverage ${formatCoverage(coverage, 6)} < ${coverageMin}${noGain}`);
    }
    const gains = isPayloadSmaller(sizeBytes, escapeCount, store.chunkSize);
    if (skipNoGain && !gains) return stale && !otherFile ? staleFailure() : skipped(describeNoGain(sizeBytes, escapeCount, store.chunkSize));
    // One a build caches: its bytes are bound only once build --rebind moves the binding.
    if (stale) return staleFailure();
    // A default build caches it, whether it shrinks or not: missing, unless judged as --skip-no-gain.
    const optIn = gains ? '' : '; it would not shrink: verify --skip-no-gain judges a cache built with --skip-no-gain, which skips it';
    return { ...base, key, status: 'failed', reason: `missing: passes the coverage gate but is not in the cache (run build)${optIn}` };
  }
  // Zero-byte slices are not aliased (builds before 2026-12-04 bound one to whichever came first).
  if (!bySlice && sizeBytes > 0 && !stale && byKey.sliceKeys.length >= MAX_SLICE_KEYS_PER_ENTRY) {
    // What the build does with the thousands-and-first identical tensor: left unbound, served raw.
    return { ...base, key, status: 'not_cached', reason: `its entry holds MAX_SLICE_KEYS_PER_ENTRY (${MAX_SLICE_KEYS_PER_ENTRY}) slices of identical tensors already` };
  }
  if (!bySlice && sizeBytes > 0) {
    if (stale) return staleFailure();
    // A build --skip-no-gain skips it unread (skipped_no_gain): its bytes are cached for another tensor, and stay unbound.
    if (skipNoGain && !canPayloadShrink(sizeBytes, store.chunkSize)) return { ...base, key, status: 'not_cached', reason: describeNoGain(sizeBytes, 0, store.chunkSize) };
    return { ...base, key, status: 'failed', reason: UNBOUND_REASON, unbound: true };
  }

  // The entry was found by this tensor's content key, so it describes these values; a manifest
  // that says otherwise is damaged, and its sizes must not size a buffer.
  if (!entryFits(byKey, sizeBytes)) {
    return { ...base, key, status: 'failed', reason: `its entry describes ${byKey.meta.elementCount} values in ${byKey.compBytes} bytes, the tensor has ${sizeBytes / 2} values` };
  }
  // The entry compared in the scan (always, but for an empty tensor, which has no binding).
  let read = candidate?.key === key ? candidateRead! : undefined;
  let comparison = read === undefined ? undefined : scan.comparison;
  if (read === undefined) {
    read = await readPayload(context, byKey);
    if ('payload' in read) comparison = (await scanTensor(context, tensor, { payload: read.payload })).comparison!;
  }
  if ('error' in read) return { ...base, key, status: 'failed', reason: describeError(read.error) };
  const failure = describeMismatch(read.payload, comparison!, scan.blocks);
  if (failure !== null) return { ...base, key, status: 'failed', ...failure };
  if (unrecorded) {
    // A file changed before the MAX_SLICE_STAMPS whose stamps the binding keeps is never recorded: a build cannot help.
    const notKept = !isS3Url(context.store.root) && fileStamp !== null && !isSliceStampKept(matching.stamps, fileStamp);
    if (notKept) {
      return {
        ...base,
        key,
        status: 'ok',
        reason: `its binding has no record of this shard file (${describeStamp(fileStamp)}), and none is made: it changed before the ${MAX_SLICE_STAMPS} files whose stamps the binding keeps (MAX_SLICE_STAMPS: the files changed most recently keep the slots), so neither a load nor a build records it; its bytes are the entry's, so every new process checks them once (a raw read and a hash) and then serves them from the cache; a cache of its own for these files avoids it`,
        unrecorded: true,
        stampNotKept: true,
      };
    }
    return {
      ...base,
      key,
      status: 'ok',
      // An s3:// cache's bindings carry no local file stamp by design (a stamp is one host's): no copy
      // or touched file to guess at there.
      reason: isS3Url(context.store.root)
        ? "its bytes are the entry's; an s3:// cache keeps no local file stamps in the bucket (by design: a stamp is one host's file), so a load checks them once per host (a raw read and a hash) and then serves them from the cache; a load with a readThroughDir records this file's stamp on that host"
        : `its binding has no record of this shard file (${fileStamp === null ? 'unknown' : describeStamp(fileStamp)}; a copy, a touched file, or a cache built before 2026-12-05): its bytes are the entry's, so a load checks them once (a raw read and a hash; at every load on a file system whose stamps prove nothing, such as squashfs) and then serves them from the cache; run build to record the file now`,
      unrecorded: true,
    };
  }
  return { ...base, key, status: 'ok', reason: null };
}

/**
 * Scans the tensor (scanTensorBlocks). One of a block or less is read whole by the model, into the
 * first block, where a second pass of its check finds it still; a larger one is read a block at a
 * time, and its shard's stamp checked after the last.
 */
async function scanTensor(context: CheckContext, tensor: TensorInfo, what: { histogram?: boolean; payload?: Uint8Array | undefined }): Promise<TensorScan> {
  const { sizeBytes } = tensor.slice;
  const whole = sizeBytes <= context.blockBytes;
  const read = whole
    ? async (_from: number, target: Uint8Array): Promise<Uint8Array> => {
        if (context.held.tensor !== tensor) {
          context.held.tensor = undefined;
          await readTensorBytes(context.model, tensor, target).catch((error: unknown) => {
            throw describeModelObjectChanged(error, { file: tensor.shardPath, tensor: tensor.name, verb: 'verify' }) ?? error;
          });
          context.held.tensor = tensor;
        }
        return target;
      }
    : (from: number, target: Uint8Array): Promise<Uint8Array> => {
        context.held.tensor = undefined;
        return context.reader.read(tensor, from, target);
      };
  const scan = await scanTensorBlocks(tensor.shape, sizeBytes, { blockBytes: context.blockBytes, buffers: context.buffers, read, ...what, signal: context.signal, onBlock: context.onBlock });
  if (!whole) context.reader.checkUnchanged(tensor);
  return scan;
}

/** Why the decoded values fail the check, or null where they are the file's. */
function describeMismatch(payload: Uint8Array, comparison: DecodedComparison, blocks: number): Pick<ModelTensorCheck, 'reason' | 'firstDifference'> | null {
  if (comparison.kind === 'same') return null;
  // The report a whole decode gave: it checks every chunk's escapes before any value, and decodes
  // every value before the bytes are compared. Block by block, a block may fail before the rule a
  // later one breaks is seen; the payload's structure, checked whole, names that rule.
  if (blocks > 1) {
    const broken = findBrokenDecodeRule(payload);
    if (broken !== null) return { reason: describeError(broken) };
  }
  if (comparison.kind === 'error') return { reason: describeError(comparison.error) };
  const { index, fileValue, decodedValue } = comparison;
  const hex = (value: number) => `0x${value.toString(16).padStart(4, '0')}`;
  return {
    reason: `decoded bytes differ from the file at value ${index} (byte ${2 * index} of the tensor): the file holds ${hex(fileValue)}, the cache decodes ${hex(decodedValue)}`,
    firstDifference: { index, offsetBytes: 2 * index },
  };
}

/** The first decoding rule (FORMAT.md reader rule 8) the whole payload breaks, in a whole decode's order; null if none. */
function findBrokenDecodeRule(payload: Uint8Array): unknown {
  try {
    const meta = readPayloadMeta(payload);
    validatePayloadStructure(payload, meta, readEscapeStreams(payload, meta));
    return null;
  } catch (error) {
    return error;
  }
}

/** `its payload would be 1,024 bytes, not smaller than its 64 raw bytes` (with no escapes: the smallest it can be). */
function describePayloadSize(rawBytes: number, chunkSize: number): string {
  const payloadBytes = computePayloadLayout(bf16ValueCount(rawBytes), 0, chunkSize).totalBytes;
  return `its payload would be ${formatCount(payloadBytes)} bytes, not smaller than its ${formatCount(rawBytes)} raw bytes`;
}
