// Checks a cache against a model: every tensor is found by its slice key and by its content key
// and decodes bit-identical to the file, or is not cached for a stated reason (not BF16, below the
// coverage gate, too large). Anything else (missing, unaliased, bound to other bytes, corrupt,
// different bytes) is a failure.
import { calibrateFromHistogram, countExponents, decode } from '@splitzip/codec';
import { MAX_BUFFER_BYTES, openSafetensorsModel, parseFileStamp, readTensorBytes, type TensorInfo } from '@splitzip/safetensors';
import { classifyBinding, computeContentKey, MAX_SLICE_KEYS_PER_ENTRY, MAX_SLICE_STAMPS, shardStampKind, type CacheStore } from '@splitzip/store';
import { describeError } from './describe-error.js';
import { isCacheableSize, TOO_LARGE_REASON } from './limits.js';
import { viewBf16 } from './tensor-tasks.js';
import { throwIfInterrupted } from './throw-if-interrupted.js';

export type ModelTensorStatus = 'ok' | 'not_cached' | 'failed';

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
   * True where it is ok, but its slice's binding has no record of this shard file (a copy, a touched
   * file, a cache built before 2026-12-05): the bytes are the entry's, so the runtime serves it from
   * the cache after checking it once (a raw read and a hash), and a build records it now. `reason`
   * says so (the text report groups these per shard).
   */
  unrecorded?: true;
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
  /** Tensors below this Top-16 coverage are expected to be absent. */
  coverageMin: number;
  signal?: AbortSignal | undefined;
  onProgress?: ((event: { doneBytes: number; totalBytes: number; tensor: string }) => void) | undefined;
}

export async function verifyModelCache(store: CacheStore, modelPath: string, options: VerifyModelCacheOptions): Promise<ModelCheckReport> {
  const model = await openSafetensorsModel(modelPath);
  try {
    const tensors = model.tensors;
    const isChecked = (t: (typeof tensors)[number]) => t.dtype === 'BF16' && isCacheableSize(t.slice.sizeBytes);
    const totalBytes = tensors.reduce((sum, t) => sum + (isChecked(t) ? t.slice.sizeBytes : 0), 0);
    // One buffer each for the file's bytes and the decoded values, sized once. The blob's grows to
    // the payloads of this model's tensors only: sized from every entry, one entry of another
    // model (or a damaged manifest's) decided the allocation, up to a RangeError.
    let largestRaw = 0;
    for (const t of tensors) if (isChecked(t)) largestRaw = Math.max(largestRaw, t.slice.sizeBytes);
    // `% 2`, not `& 1`: sizes here pass 2^32, where a 32-bit operator reads a wrapped value.
    const fileBuffer = new Uint8Array(largestRaw + (largestRaw % 2));
    const blobSlot = { bytes: new Uint8Array(0) };
    const decoded = new Uint16Array(Math.ceil(largestRaw / 2));

    const checks: ModelTensorCheck[] = [];
    let doneBytes = 0;
    for (const tensor of tensors) {
      throwIfInterrupted(options.signal);
      const check = await checkTensor(store, model, tensor, options.coverageMin, { fileBuffer, blobSlot, decoded });
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
    await model.close();
  }
}

async function checkTensor(
  store: CacheStore,
  model: Parameters<typeof readTensorBytes>[0],
  tensor: TensorInfo,
  coverageMin: number,
  buffers: { fileBuffer: Uint8Array; blobSlot: { bytes: Uint8Array }; decoded: Uint16Array },
): Promise<ModelTensorCheck> {
  const { shardName, offsetBytes, sizeBytes } = tensor.slice;
  const base = { name: tensor.name, dtype: tensor.dtype, shard: shardName, offsetBytes, sizeBytes };
  // As the runtime (classifyBinding): a binding with no record of this shard file (other files'
  // stamps, stamps of the old form, none at all) is used only for bytes checked to be its entry's
  // (the runtime reads and hashes them once).
  const binding = store.lookupSliceBinding(shardName, offsetBytes, sizeBytes);
  const fileStamp = model.shards.find((shard) => shard.name === shardName)?.stamp ?? null;
  const unrecordedFile = binding !== undefined && fileStamp !== null && classifyBinding(binding, fileStamp) !== 'trusted';
  let bySlice = unrecordedFile ? undefined : binding?.entry;
  if (tensor.dtype !== 'BF16' || !isCacheableSize(sizeBytes)) {
    const reason = tensor.dtype !== 'BF16' ? `dtype ${tensor.dtype} is not BF16` : TOO_LARGE_REASON;
    // A zero-byte slice is shared by every empty tensor at that offset (older builds bound it to one).
    if (bySlice && sizeBytes > 0) return { ...base, key: null, status: 'failed', reason: `its slice key is bound to entry ${bySlice.key}, but ${reason}` };
    return { ...base, key: null, status: 'not_cached', reason };
  }

  const bytes = await readTensorBytes(model, tensor, buffers.fileBuffer.subarray(0, sizeBytes));
  const key = computeContentKey(bytes, tensor.shape, 'BF16');
  // The check the runtime makes at the first load, made here: the bytes are the bound entry's.
  const unrecorded = unrecordedFile && binding.entry.key === key && sizeBytes > 0;
  if (unrecorded) bySlice = binding.entry;
  const stale = unrecordedFile && !unrecorded;
  const byKey = store.getEntry(key);
  // The file holds other bytes than the entry its slice is bound to, and the binding has no record of it.
  const staleFailure = (): ModelTensorCheck => ({
    ...base,
    key,
    status: 'failed',
    reason: `its slice is bound to entry ${binding!.entry.key}, ${describeRecorded(binding!.stamps)}, and it is ${fileStamp === null ? 'unknown' : describeStamp(fileStamp)} now and holds other bytes (changed, or another model's${byKey ? `; they are in the cache as ${key}` : ''}): run build --rebind`,
    stale: true,
  });
  if (bySlice && bySlice.key !== key && sizeBytes > 0) {
    return { ...base, key, status: 'failed', reason: `slice key bound to entry ${bySlice.key}, but the file now holds ${key} (shard changed since the build?)` };
  }
  if (!byKey) {
    const { coverage } = calibrateFromHistogram(countExponents(viewBf16(bytes)));
    if (coverage < coverageMin) {
      return { ...base, key, status: 'not_cached', reason: `Top-16 coverage ${coverage.toFixed(6)} < ${coverageMin}` };
    }
    if (stale && sizeBytes > 0) return staleFailure();
    return { ...base, key, status: 'failed', reason: 'missing: passes the coverage gate but is not in the cache (run build)' };
  }
  // Zero-byte slices are not aliased (builds before 2026-12-04 bound one to whichever came first).
  if (!bySlice && sizeBytes > 0 && !stale && byKey.sliceKeys.length >= MAX_SLICE_KEYS_PER_ENTRY) {
    // What the build does with the thousands-and-first identical tensor: left unbound, served raw.
    return { ...base, key, status: 'not_cached', reason: `its entry holds MAX_SLICE_KEYS_PER_ENTRY (${MAX_SLICE_KEYS_PER_ENTRY}) slices of identical tensors already` };
  }
  if (!bySlice && sizeBytes > 0) {
    if (stale) return staleFailure();
    return { ...base, key, status: 'failed', reason: 'in the cache by content key, but its slice key is not aliased' };
  }

  // The entry was found by this tensor's content key, so it describes these values; a manifest
  // that says otherwise is damaged, and its sizes must not size a buffer.
  if (byKey.meta.elementCount !== sizeBytes / 2 || byKey.compBytes > MAX_BUFFER_BYTES) {
    return { ...base, key, status: 'failed', reason: `its entry describes ${byKey.meta.elementCount} values in ${byKey.compBytes} bytes, the tensor has ${sizeBytes / 2} values` };
  }
  if (buffers.blobSlot.bytes.length < byKey.compBytes) buffers.blobSlot.bytes = new Uint8Array(byKey.compBytes);
  try {
    const payload = await store.readBlob(key, buffers.blobSlot.bytes);
    const values = decode(payload, buffers.decoded.subarray(0, sizeBytes / 2));
    const decodedBytes = new Uint8Array(values.buffer, values.byteOffset, sizeBytes);
    if (!Buffer.from(decodedBytes.buffer, decodedBytes.byteOffset, sizeBytes).equals(Buffer.from(bytes.buffer, bytes.byteOffset, sizeBytes))) {
      return { ...base, key, status: 'failed', reason: 'decoded bytes differ from the file' };
    }
  } catch (error) {
    return { ...base, key, status: 'failed', reason: describeError(error) };
  }
  if (unrecorded) {
    const dropped = binding.stamps.length >= MAX_SLICE_STAMPS ? ` (a binding keeps the stamps of its latest ${MAX_SLICE_STAMPS} files: this one's may have been dropped for newer copies)` : '';
    return {
      ...base,
      key,
      status: 'ok',
      reason: `its binding has no record of this shard file (${fileStamp === null ? 'unknown' : describeStamp(fileStamp)}; a copy, a touched file, or a cache built before 2026-12-05)${dropped}: its bytes are the entry's, so a load checks them once (a raw read and a hash; at every load on a file system whose stamps prove nothing, such as squashfs) and then serves them from the cache; run build to record the file now`,
      unrecorded: true,
    };
  }
  return { ...base, key, status: 'ok', reason: null };
}
