import { createHash } from 'node:crypto';
import { isFromOtherFile, parseFileStamp, readShardStamp, type SafetensorsModel, type SliceKey } from '@splitzip/safetensors';
import { isS3Url, isStoreError, MAX_SLICE_BINDINGS, S3_LAYOUT_FORMAT_PER_FILE, MAX_SLICE_KEYS_PER_ENTRY, MAX_SLICE_STAMPS, shardStampKind, type AliasSliceItem, type AliasSlicesOptions, type CacheEntry, type CacheStore, type SliceBinding, type SliceKeyTuple } from '@splitzip/store';
import type { DecodeBackend } from './create-cpu-decoder.js';
import { describeBuildRemedy, describeWritableRemedy, findUnwritableReason } from './describe-build-remedy.js';
import { entryDescribesTensor } from './entry-describes-tensor.js';
import { describeError, isRuntimeError, RuntimeError } from './errors.js';
import { hashTensorKey } from './hash-tensor-key.js';
import { findBindingStamps, isStampKept } from './is-stamp-kept.js';
import { keepsBindingsPerFile } from './bindings-per-file.js';
import type { ShardCache } from './open-shard-cache.js';
import { listSliceBindings } from './list-slice-bindings.js';
import type { ServeTarget } from './serve-tensor.js';
import { OTHER_FILE_BINDING, staleBindingRemedy } from './stale-binding-remedy.js';
import type { TensorReport } from './types.js';

/** What a cache handle's stamp records came to (ShardCache.flushObjectStamps: object and file stamps alike). */
export interface ObjectStampStats {
  /** Stamps recorded with their bindings. */
  recorded: number;
  /**
   * Stamps these records did not keep: each ranked last among its binding's MAX_SLICE_STAMPS (a file
   * changed before the files whose stamps the binding keeps: isSliceStampKept). The store answers
   * them `true` (the slice is bound) but records nothing; not in `recorded`. Since 2026-12-07.
   */
  notKept: number;
  /** Records the store refused or could not make (the bindings stay unchecked: the next load checks again). */
  failed: number;
  /** The last failure, while no record has succeeded since. */
  lastError?: { code: string; message: string } | undefined;
  /**
   * Other files' bindings the store dropped for a binding these records added beside them (past
   * MAX_SLICE_BINDINGS a slice keeps the bindings of the files changed most recently). Since 0.56.
   */
  droppedBindings: number;
  /** Bindings these records would have added that ranked last past MAX_SLICE_BINDINGS: not bound (not in `recorded`). Since 0.56. */
  outrankedBindings: number;
  /**
   * Bindings these records would have added beside other files' that the store did not add: at
   * its commit the cache held no second binding of any slice (another process had removed the
   * last one since this handle looked), and a load never moves a cache to manifest format 3
   * (AliasSliceItem.besideOnlyIfSeveral). Neither `recorded` nor `failed`; later loads through a
   * fresh view say why the tensor stays `stale`.
   */
  keptFormatBindings: number;
}

/** How a report names the shard: an object (an s3:// model's) or a local file. */
export function describeShard(shardName: string, stamp: string | null): string {
  if (stamp === null) return `shard ${shardName} (no stamp)`;
  return `${shardStampKind(stamp) === 'object' ? 'shard object' : 'shard file'} ${shardName} (${stamp})`;
}

/**
 * A binding not yet checked against its shard (classifyBinding: 'unchecked': an object stamped by
 * its ETag, or a local file whose stamp the binding has no record of): the tensor was read raw
 * into `data`. Its content key is computed and matched against every binding of the slice that
 * describes the tensor (`unchecked.candidates`: one per file, revisions side by side); when it is
 * one's entry, the shard's stamp is queued to be recorded with that binding (the store takes it off
 * the others), so later loads of this object or file are served from the cache;
 * when it is not, the shard holds other bytes (another model's of the same layout, or the file
 * changed) and the tensor stays raw (`stale`); the mismatch is remembered for the handle's store,
 * so later loads of it are `stale` without hashing again. The record is not waited for: on a local
 * cache it takes the writer lock (a stopped builder holds it for the lock timeout), on an s3://
 * cache it lists the cache; the load goes on, and the cache's close() waits for it. The hash runs on
 * a decode thread where the backend has one (hashTensorKey). With `source` (an object's range), a
 * mismatch is judged only after the range's read-through copy is dropped and it is fetched once
 * more into `data`: the entry's bytes then are `unchecked` as above; the same other bytes, `stale`;
 * two reads that differ, SHARD_READ_FAILED (retryable), their copy dropped, unless the second one's
 * bytes are an entry's of the tensor's own name and shape (a tensor moved here by a rewrite): then
 * `stale` on them, as above (a move it may record). A custom backend's hash (hashContentKey) that
 * has not settled when `signal` fires is not waited for (ABORTED), as in every other hash of a load:
 * one that never settled held the aborted load for good.
 */
export async function checkSourceBytes(
  cache: ShardCache,
  backend: DecodeBackend,
  target: ServeTarget,
  unchecked: { entry: CacheEntry; stamp: string | null; recorded: readonly string[]; weak?: string; candidates?: readonly CacheEntry[]; bindings?: number },
  data: Uint8Array,
  report: TensorReport,
  source?: SourceRefetch,
  signal?: AbortSignal,
): Promise<void> {
  const { stamp, weak: weakNote } = unchecked;
  const { shardName, offsetBytes, sizeBytes } = target.slice;
  // Every binding of the slice that describes the tensor (one per file: the bytes may be any
  // revision's), the latest first; the stamp goes with the one whose entry they are.
  const candidates = unchecked.candidates ?? [unchecked.entry];
  const matchOf = (key: string | undefined) => (key === undefined ? undefined : candidates.find((candidate) => candidate.key === key));
  const keyOf = async (): Promise<string | undefined> => {
    try {
      const hashed = await hashTensorKey(backend, data, target.shape, 'BF16', signal, target.name);
      report.digestMs += hashed.cpuMs;
      return hashed.key;
    } catch (error) {
      if (isRuntimeError(error, 'ABORTED')) throw error; // the load's abort, not the bytes
      return undefined; // bytes that cannot be this shape's BF16 tensor (targetFromInfo sends none here): not the entry's
    }
  };
  let key = await keyOf();
  report.key = unchecked.entry.key;
  let refetched = false;
  let secondVouched = false;
  if (matchOf(key) === undefined && source !== undefined) {
    // An object's bytes may be a read-through copy of a GET body damaged in transit, or such a body
    // itself: judged on bytes fetched once more, never on the copy's word (its digest only proves
    // it is what came).
    const first = key;
    refetched = await source.refetch();
    if (refetched) key = await keyOf();
    // Two reads that differ: one was damaged (the other ranges of this source came the same way).
    if (refetched && key !== first) await source.reportDamage();
    // Neither the entry's, unless the second read's bytes are an entry's of this tensor's name and
    // shape (its own, moved here: a rewrite that moved tensors): content-addressed bytes vouch for
    // themselves, so the first read was the damaged one, and this one is judged as below. Not an
    // entry of another name: bytes of another range (a proxy that answered the wrong one) can be.
    const vouched = key === undefined ? undefined : cache.getEntry(key);
    secondVouched = refetched && key !== first && vouched !== undefined && vouched.qualname === target.name && entryDescribesTensor(vouched, target);
    if (refetched && matchOf(key) === undefined && key !== first && !secondVouched) {
      await source.dropCopy();
      throw new RuntimeError(
        'SHARD_READ_FAILED',
        `${target.name}: two reads of ${describeShard(shardName, stamp)} at ${offsetBytes}+${sizeBytes} gave different bytes, neither the entry's: damaged in transit`,
        { tensor: target.name, shard: shardName, offsetBytes, sizeBytes, retryable: true },
      );
    }
  }
  const matched = matchOf(key);
  if (stamp === null) {
    // No stamp names the file: nothing to remember, bind or record; checked again at every load.
    // One binding: recorded only from local files (resolveTensorRequest), perhaps another revision's.
    const one = (unchecked.bindings ?? candidates.length) === 1;
    const several = `the ${unchecked.bindings ?? candidates.length} bindings of its slice (one per file)`;
    report.reason = matched === undefined ? 'stale' : 'unchecked';
    if (matched !== undefined) report.key = matched.key;
    // The trust opt-in only where the bytes are the binding's: for other bytes it would serve the
    // other revision's, so a stale one names what binds this revision's bytes instead.
    report.detail =
      matched === undefined
        ? `${describeShard(shardName, null)} holds other bytes than ${one ? `the entry of ${ONE_FILE_BINDING}` : `every entry of ${several}`}${refetched ? '; the same bytes fetched twice' : ''}: served raw; without a stamp no binding of its own can be made or picked (${NO_STAMP_NOTE})${one ? `; ${describeBuildRemedy(cache, stamplessStaleRemedy(cache))}` : ''}`
        : `${describeShard(shardName, null)} checked: its bytes are entry ${matched.key}'s, ${one ? ONE_FILE_BINDING : `one of ${several}`}${healed(refetched)}; without a stamp ${one ? 'it cannot be told from another revision of these files, nor recorded' : 'none can be picked or recorded for it'}, so it is checked at every load (${one ? `${NO_STAMP_NOTE}; ${STAMPLESS_TRUST_NOTE}` : NO_STAMP_NOTE})`;
    return;
  }
  if (matched === undefined) {
    // On a weak file system the stamp names other files too: nothing to remember by it, nothing to bind by it.
    if (weakNote === undefined) for (const candidate of candidates) rememberCheck(recorderOf(cache.store).mismatched, { key: candidate.key, shardName, offsetBytes, sizeBytes, stamp });
    // The content key just computed (no second hash) may be an entry's of this tensor's name.
    const rebound = weakNote === undefined && key !== undefined ? rebindFoundSlice(cache, target, unchecked.entry.key, key, stamp) : undefined;
    report.reason = 'stale';
    // A binding recorded only with other files of the shard name: one a build skips stays (see OTHER_FILE_REMEDY).
    const otherFile = isFromOtherFile(unchecked.recorded, stamp);
    const several = (unchecked.bindings ?? 1) > 1 ? `any of the ${unchecked.bindings} entries its slice is bound to (one binding per file)` : 'the entry its slice is bound to';
    report.detail = `${describeShard(shardName, stamp)} holds other bytes than ${several} (${otherFile ? OTHER_FILE_BINDING : "changed, or another model's of this name and layout"}${secondVouched ? '; its first read (a read-through copy, or a GET body damaged in transit) held yet other bytes: that copy was dropped and the range fetched again' : refetched ? '; the same bytes fetched twice' : ''}): served raw; ${rebound ?? describeBuildRemedy(cache, staleBindingRemedy(unchecked.recorded, stamp, cache.remote))}`;
    return;
  }
  report.key = matched.key;
  const item = { key: matched.key, shardName, offsetBytes, sizeBytes, stamp };
  report.reason = 'unchecked';
  const healedNote = healed(refetched);
  if (weakNote !== undefined) {
    report.detail = `${describeShard(shardName, stamp)} checked: its bytes are the entry's; it is on ${weakNote}, whose file stamps cannot tell two images' files apart, so it is checked at every load (${WEAK_TRUST_NOTE})`;
    return;
  }
  // Kept by this handle whatever becomes of the record: a cache the loader cannot write to (a
  // read-only mount shipped beside a copied model) checked every tensor again at every load.
  rememberCheck(recorderOf(cache.store).matched, item);
  const recorder = queueStamp(cache.store, item);
  const last = recorder.stats.lastError;
  // Past MAX_SLICE_STAMPS a file changed before those the binding keeps is not recorded (the store's rule).
  const kept = isStampKept(cache.remote, findBindingStamps(cache, shardName, offsetBytes, sizeBytes, matched.key), stamp);
  // Another entry's binding of the slice: should this one be gone when the record commits (gc --model
  // removed it since this handle's view), the record binds beside that one (besideOnlyIfSeveral).
  const besideIfGone = keepsBindingsPerFile(cache.store) && !cache.remote && listSliceBindings(cache, shardName, offsetBytes, sizeBytes).some((binding) => binding.entry.key !== matched.key);
  const where = describeStampRecord(cache, stamp, 'stamp', kept, besideIfGone ? 'if-gone' : undefined);
  report.detail =
    `${describeShard(shardName, stamp)} checked: its bytes are the entry's; later loads through this cache handle serve it from the cache, and ${where}` +
    healedNote +
    (last === undefined ? '' : `; but this cache handle's last stamp record failed (${last.message.startsWith(`${last.code}: `) ? last.message : `${last.code}: ${last.message}`}): until one succeeds, other processes check again`);
}

/** What a report adds when a range was fetched again past a damaged first read. */
function healed(refetched: boolean): string {
  return refetched ? '; its first read (a read-through copy, or a GET body damaged in transit) held other bytes: that copy was dropped and the range fetched again' : '';
}

/** Why a stampless shard at a slice with several bindings is hashed at every load. */
export const NO_STAMP_NOTE = "an s3:// object with an ETag, or a local file, is checked once and then served from the cache";

/** A stampless shard's slice whose single binding holds file stamps only (another revision's, maybe: resolveTensorRequest). */
export const ONE_FILE_BINDING = "the slice's one binding, recorded from local files only (maybe another revision's of these files)";

/**
 * What gives a stampless shard's tensor found `stale` (other bytes than its slice's bindings', or
 * another shape) its own bytes from the cache: a binding of this revision's entry, which its loads
 * then find among the slice's bindings (checked at every load, as any stampless shard's), or a
 * cache of its own. Not objectSources 'trust': that serves the binding there, the other revision's.
 */
export function stamplessStaleRemedy(cache: ShardCache): string {
  // Not s3://: a build binds a local model's tensors there one per slice (file stamps stay per host).
  return keepsBindingsPerFile(cache.store) && !cache.remote
    ? "a build of this revision binds the tensor beside that binding (one binding per file: its loads then find its bytes among the slice's bindings, checked at every load), or a cache of its own for this revision keeps the other revision's binding apart"
    : "a cache of its own for this revision keeps the other revision's binding apart (in this one, a build of this revision with --rebind takes the slice from it)";
}

/** The opt-in that serves a stampless shard its slice's single binding unchecked (the rule until 2026-12-07): named for `unchecked` only, where the bytes were the binding's. */
export const STAMPLESS_TRUST_NOTE = "objectSources: 'trust' serves it from that binding unchecked, which is wrong wherever revisions share the cache";

/**
 * A local cache whose journal the store found damaged (JOURNAL_INVALID: its header, or a record
 * with intact ones after it), which refuses every write (the stamps and bindings loads record
 * included) until `splitzip build --repair` sets it aside; undefined for a healthy journal and on
 * `s3://`. The message names the damage and the commands that report and repair it.
 */
export function describeJournalDamage(cache: ShardCache): { code: string; message: string } | undefined {
  let damage: unknown;
  try {
    damage = cache.store.journalDamage;
  } catch {
    return undefined; // a caller's wrapper store without it
  }
  if (damage === undefined || damage === null) return undefined;
  const { code, message } = describeError(damage);
  const said = message.startsWith(`${code}: `) ? message : `${code}: ${message}`;
  return {
    code,
    message: `the cache's journal is damaged (${said}), and the store refuses every write to it until it is set aside: \`splitzip verify ${cache.root}\` reports it, \`splitzip build <model> --out ${cache.root} --repair\` sets it aside (the entries of its unreadable records are lost)`,
  };
}

/**
 * Where a queued stamp record goes, as a report says it: an s3:// cache keeps a file's stamp for
 * this host only (its readThroughDir, where it has one); a local cache this process cannot write
 * (a read-only mount, another user's directory) records nothing, which every report of a new
 * process said was "being recorded" while each of them checked every tensor again.
 */
function describeStampRecord(cache: ShardCache, stamp: string, what: 'stamp' | 'binding' = 'stamp', kept = true, beside?: 'if-gone' | 'beside' | 'if-bound'): string {
  const subject = what === 'stamp' ? 'its stamp' : 'the binding';
  if (!kept) {
    // The store answers the record `true` and keeps nothing: "being recorded" was wrong, and a build does not help.
    const keeper = cache.remote && shardStampKind(stamp) === 'file' ? 'this host keeps for the binding' : 'the binding keeps';
    return `${subject} is not recorded: its file changed before the ${MAX_SLICE_STAMPS} files whose stamps ${keeper} (MAX_SLICE_STAMPS: the files changed most recently keep the slots), so every new process checks it once; a cache of its own for these files avoids it`;
  }
  if (cache.remote && shardStampKind(stamp) === 'file') {
    return `${subject} is being kept for this host (other processes of this host trust it where the cache has a readThroughDir)`;
  }
  const unwritable = findUnwritableReason(cache);
  if (unwritable !== undefined) {
    const fix = describeWritableRemedy(unwritable);
    const records = fix.startsWith('with ') ? 'one load, or a build of this model, with write access records it' : `${fix}; then one load or a build of this model records it`;
    return `${subject} cannot be recorded: this process cannot write the cache (${unwritable}), so every new process checks it again (${records})`;
  }
  const damage = describeJournalDamage(cache);
  if (damage !== undefined) {
    // Every record would fail JOURNAL_INVALID: every process re-hashed every tensor, told its stamp was being recorded.
    return `${subject} cannot be recorded: ${damage.message}, so every new process checks it again`;
  }
  const recording = what === 'stamp' ? 'its stamp is being recorded with the binding for other processes' : 'the binding is being recorded for other processes';
  // A record of a load carries besideOnlyIfSeveral (enqueueRecord): where it binds beside another
  // file's binding, the store adds it only while the cache holds a second binding of some slice.
  if (beside === 'if-gone') return `${recording} (should this binding be gone when the record commits, removed by \`gc --model\` since this cache handle looked, it is added beside the slice's other bindings ${BESIDE_CAVEAT})`;
  if (beside === 'beside') return `${recording} (added ${BESIDE_CAVEAT})`;
  if (beside === 'if-bound') return `${recording} (should another writer bind the slice to another object's entry before the record commits, this binding is added beside that one only if cache.json is format 2 by then, else not recorded, cache.json keeping format 1: flushObjectStamps' keptFormatBindings)`;
  return recording;
}

/** What the store does with a load's record that binds beside another file's binding (AliasSliceItem.besideOnlyIfSeveral). */
const BESIDE_CAVEAT = "only if the cache holds a second binding of some slice when the record commits, else not recorded, the cache keeping its format (flushObjectStamps' keptFormatBindings)";

/**
 * A tensor whose slice had no binding (or, with `staleKey`, was bound to that entry, whose bytes it
 * does not hold: rebindFoundSlice), read raw, whose content key is an entry's (explainMiss):
 * the slice is bound to that entry with the shard's stamp, in the background as a checked stamp is
 * recorded (the cache was built from other shard names or offsets: a renamed shard, a copy of the
 * model laid out otherwise). The runtime aliased nothing before, and every load read and hashed
 * every such tensor again (4-5x a raw load) until a build bound them. Remembered by this handle
 * at once. Returns what the report says of the record.
 */
export function bindFoundSlice(cache: ShardCache, item: AliasSliceItem & { key: string; stamp: string }, staleKey?: string): string {
  const { found, foundBeside } = recorderOf(cache.store);
  const id = foundSliceId(item.shardName, item.offsetBytes, item.sizeBytes, item.stamp);
  if (!found.has(id) && found.size >= MAX_REMEMBERED_CHECKS) {
    const oldest = found.keys().next().value!;
    found.delete(oldest);
    foundBeside.delete(oldest);
  }
  found.set(id, item.key);
  // The entry's list as it is now: the store's lists are frozen snapshots, replaced on a change (a
  // copy only for a caller's store whose list is not frozen). An s3:// cache builds them anew at
  // each refresh, so each kept one may be a list of its own: bounded by MAX_BESIDE_SLICES.
  const beside = cache.getEntry(item.key)?.sliceKeys ?? [];
  if (beside.length > MAX_BESIDE_SLICES) foundBeside.delete(id);
  else foundBeside.set(id, Object.isFrozen(beside) ? beside : Object.freeze([...beside]));
  const recorder = enqueueRecord(cache.store, { ...item, moveFrom: staleKey ?? item.key });
  const last = recorder.stats.lastError;
  // s3:// at format 1, a slice unbound in this view: another writer may bind it before the record
  // commits, and the store then keeps the record out rather than move cache.json to format 2.
  const raced = staleKey === undefined && cache.remote && keepsBindingsPerFile(cache.store) && !allowsSeveralBindings(cache);
  const where = describeStampRecord(cache, item.stamp, 'binding', true, staleKey !== undefined && isMoveBeside(cache, item, staleKey) ? 'beside' : raced ? 'if-bound' : undefined);
  return (
    `bound now: later loads through this cache handle serve it from the cache, and ${where}` +
    (last === undefined ? '' : `; but this cache handle's last record failed (${last.message.startsWith(`${last.code}: `) ? last.message : `${last.code}: ${last.message}`}): until one succeeds, other processes hash it again`)
  );
}

/**
 * Whether a record moving the slice off `staleKey` binds beside it instead (a handle with one binding
 * per file): the stale binding is another file's (the store's bindingOfThisFile rule: it holds not
 * the stamp but a file stamp of another inode), from which the store moves nothing; such a record
 * carries besideOnlyIfSeveral (enqueueRecord).
 */
function isMoveBeside(cache: ShardCache, item: { shardName: string; offsetBytes: number; sizeBytes: number; stamp: string }, staleKey: string): boolean {
  if (!keepsBindingsPerFile(cache.store) || cache.remote) return false;
  const stale = listSliceBindings(cache, item.shardName, item.offsetBytes, item.sizeBytes).find((binding) => binding.entry.key === staleKey);
  if (stale === undefined || stale.stamps.includes(item.stamp)) return false;
  // An object's stamp (FILE-BINDINGS.md phase 3): the store moves nothing where each binding holds a stamp, none this one.
  if (shardStampKind(item.stamp) === 'object') {
    return listSliceBindings(cache, item.shardName, item.offsetBytes, item.sizeBytes).every((binding) => binding.stamps.length > 0 && !binding.stamps.includes(item.stamp));
  }
  const inode = parseFileStamp(item.stamp)?.inode;
  return stale.stamps.some((other) => {
    const otherInode = parseFileStamp(other)?.inode;
    return otherInode !== undefined && otherInode !== inode;
  });
}

/**
 * A bound slice whose bytes checkSourceBytes found not to be its entry's (`stale`), hashed to
 * `key`: when that is an entry of the tensor's own name (bindFoundSlice's rule: a shard rewritten
 * so that its tensors moved, one onto another's old span with its shape), the slice is bound to it
 * with the shard's stamp, in the background as bindFoundSlice binds one, and remembered by this
 * handle at once (findBoundSlice). Before, such a tensor was served raw, and hashed once by every
 * process, until a build with --rebind. Only when the stale entry's own tensor is in the model at
 * a slice no longer bound to it (it moved): not when the stale entry is of the tensor's name too
 * (another revision of it: two models of one layout would take the slice from each other), nor
 * when its own tensor is still bound to it (bytes another model shared at this slice). The store's
 * rebind (aliasSlices { rebind }) moves a slice from whatever entry holds it, a binding another
 * writer made since this check included, so the record is an aliasSlices item with `moveFrom:
 * staleKey` instead (QueuedRecord): moved only while still bound to that entry, bound if unbound,
 * and left alone (false) when bound to any other entry by then; the slice is never unbound on the
 * way. Not where this process cannot write the local cache (the stale report names the build that
 * can: describeBuildRemedy), nor past the store's MAX_SLICE_KEYS_PER_ENTRY. Returns what the report
 * says of it, or undefined where nothing was bound.
 */
export function rebindFoundSlice(cache: ShardCache, target: ServeTarget, staleKey: string, key: string, stamp: string): string | undefined {
  const holder = cache.getEntry(key);
  // Bytes cached under another name (a tied weight, another model's tensor that happens to match)
  // are left to a build: a bare slice request follows whatever its slice is bound to.
  if (holder === undefined || holder.qualname !== target.name || !entryDescribesTensor(holder, target)) return undefined;
  const beside = bindBesideOtherFiles(cache, target, holder, stamp);
  if (beside !== undefined && beside !== KEEPS_FORMAT) return beside;
  // Without one binding per file (s3://, a caller's store, bindings without file stamps): a slice
  // bound to an entry of this tensor's own name holds another revision of this tensor (a
  // fine-tune and its base of one layout sharing a cache): each load of one would move the slice
  // back from the other's, a hash and a rebind every time. Left stale, as before; only a binding
  // another tensor left behind (it moved) is moved.
  const stale = cache.getEntry(staleKey);
  if (stale === undefined || stale.qualname === target.name) {
    if (beside !== KEEPS_FORMAT) return undefined;
    const { shardName, offsetBytes, sizeBytes } = target.slice;
    return describeKeptFormat(cache, holder.key, needsObjectFormat(stamp, listSliceBindings(cache, shardName, offsetBytes, sizeBytes)));
  }
  // A move is seen from the stale entry's own tensor: the model has it at another span, whose slice
  // is not bound to that entry (its bytes went elsewhere). Still bound there, the entry holds bytes
  // this slice shared in another model (one entry per distinct bytes, named after the first tensor
  // stored: a base whose t1 equals its t0), and moving the slice would take it from that model for
  // good (its loads would find it bound to this tensor's entry, of another name than its own
  // bytes'). Without a model (a bare slice request) nothing shows a move.
  const model = target.model;
  const own = model?.getTensor(stale.qualname);
  if (own === undefined || !entryDescribesTensor(stale, { dtype: own.dtype, shape: own.shape, slice: own.slice })) return undefined;
  let ownBinding: string | undefined;
  try {
    ownBinding = cache.store.lookupBySlice(own.slice.shardName, own.slice.offsetBytes, own.slice.sizeBytes)?.key;
  } catch {
    return undefined; // a caller's store that cannot say: nothing shows a move
  }
  // Still bound there, unless this handle bound it itself, from that slice's bytes hashed in this
  // file (bindFoundSlice: the slice was unbound, or held another tensor), while this slice was
  // bound to the stale entry already: then the stale entry's bytes moved there in this very file,
  // as a move shows when that record has not landed yet (a shift: a tensor inserted ahead, each
  // landing on the next one's span, the last on a new one); judged otherwise, the move hung on the
  // timing of the handle's own record. A binding of this slice made after the handle's (another
  // model's build binding bytes it shares here) is not evidence of a move.
  if (ownBinding === staleKey && !wasMovedHere(cache.store, model!, own.slice, staleKey, target.slice)) return undefined;
  if (holder.sliceKeys.length >= MAX_SLICE_KEYS_PER_ENTRY || findUnwritableReason(cache) !== undefined) return undefined;
  const { shardName, offsetBytes, sizeBytes } = target.slice;
  // Judged before the record is queued (the view then is the one the record is made from).
  const movesBeside = isMoveBeside(cache, { shardName, offsetBytes, sizeBytes, stamp }, staleKey);
  const bound = bindFoundSlice(cache, { key, shardName, offsetBytes, sizeBytes, stamp }, staleKey);
  return movesBeside
    ? `its bytes are entry ${key}'s, of this tensor's name, to which this file's binding of the slice is added beside entry ${staleKey}'s, another file's (one binding per file: nothing is moved): ${bound}`
    : `its bytes are entry ${key}'s, of this tensor's name, to which the slice is moved from entry ${staleKey} (only while it is still bound to that one): ${bound}`;
}

/**
 * A local cache that keeps one binding per file (openShardCache opens it so: FILE-BINDINGS.md),
 * whose slice is bound only to other files' entries (each binding with a file stamp, none this
 * file's), found by content key to hold `holder`'s bytes, of the tensor's name: this file's binding
 * is added beside theirs, with its stamp (the store's rule: nothing is moved, so the other
 * revisions' loads keep theirs; past MAX_SLICE_BINDINGS the least recent goes). Before, a revision
 * B of a model whose tensor's slice was bound to revision A's entry of that name was left `stale`,
 * hashed by every process, since moving the slice would take it from A. Returns what the report
 * says, or undefined where this rule does not apply (the caller's rules follow).
 */
function bindBesideOtherFiles(cache: ShardCache, target: ServeTarget, holder: CacheEntry, stamp: string): string | typeof KEEPS_FORMAT | undefined {
  if (!keepsBindingsPerFile(cache.store)) return undefined;
  const { shardName, offsetBytes, sizeBytes } = target.slice;
  const bindings = listSliceBindings(cache, shardName, offsetBytes, sizeBytes);
  if (bindings.some((binding) => binding.entry.key === holder.key)) return undefined;
  const may = mayBindBeside(cache, stamp, bindings);
  if (may !== 'beside') return may === 'keeps-format' ? KEEPS_FORMAT : undefined;
  const kind = shardStampKind(stamp);
  if (ranksLast(bindings, stamp)) {
    return `its bytes are entry ${holder.key}'s, of this tensor's name, but no binding of this file is added beside the slice's ${bindings.length} (MAX_SLICE_BINDINGS): each is of a file changed more recently, and the store keeps the bindings of the files changed most recently (it would drop this one at once); a cache of its own for this model keeps it`;
  }
  if (holder.sliceKeys.length >= MAX_SLICE_KEYS_PER_ENTRY || findUnwritableReason(cache) !== undefined) return undefined;
  const bound = bindFoundSlice(cache, { key: holder.key, shardName, offsetBytes, sizeBytes, stamp });
  const others = bindings.length === 1 ? `entry ${bindings[0]!.entry.key}'s binding` : `the ${bindings.length} bindings`;
  const full = bindings.length >= MAX_SLICE_BINDINGS ? `; the slice holds MAX_SLICE_BINDINGS (${MAX_SLICE_BINDINGS}) already, so the binding of the file changed least recently is dropped (flushObjectStamps' droppedBindings)` : '';
  // s3://: cache.json is format 2 (allowsSeveralBindings; never undone there), so the store's format
  // gate cannot refuse it: no caveat.
  const held = needsObjectFormat(stamp, bindings) ? "an object's binding beside another (manifest format 4)" : 'a second binding of some slice';
  const caveat = cache.remote ? '' : ` (added only if the cache still holds ${held} when it commits, else not recorded, the cache keeping its format: flushObjectStamps' keptFormatBindings)`;
  const files = cache.remote ? 'objects' : kind === 'object' ? 'objects or files' : 'files';
  return `its bytes are entry ${holder.key}'s, of this tensor's name, to which this ${kind}'s binding of the slice is added beside ${others} of other ${files} (one binding per file: revisions of a model share the cache${full}): ${bound}${caveat}`;
}

/**
 * Whether a load may bind `stamp`'s file or object beside `bindings` (other entries', none holding
 * `stamp`), the store's rule: 'beside'; 'keeps-format' where it could but that would move the
 * cache's format (a load never does); undefined where the rule does not apply.
 * An s3:// cache (phase 2): an object stamp among bindings each with an object stamp (a binding
 * without one would be shadowed; a file's stamps stay on the host there), while cache.json is
 * format 2 (allowsSeveralBindings: kept 2 after an unbind or gc left no second binding). A
 * directory cache: a file stamp, or (FILE-BINDINGS.md phase 3) an object stamp, among bindings each
 * with a stamp of either kind; where that leaves an object's binding (no file stamp) beside another, only while the cache
 * holds one already (manifest format 4: holdsObjectBindingsBeside), else while it holds a second
 * binding (format 3).
 */
export function mayBindBeside(cache: ShardCache, stamp: string, bindings: readonly SliceBinding[]): 'beside' | 'keeps-format' | undefined {
  if (!keepsBindingsPerFile(cache.store) || bindings.length === 0 || bindings.some((binding) => binding.stamps.includes(stamp))) return undefined;
  if (cache.remote) {
    if (shardStampKind(stamp) !== 'object' || !bindings.every((binding) => binding.stamps.some((other) => shardStampKind(other) === 'object'))) return undefined;
    return allowsSeveralBindings(cache) ? 'beside' : 'keeps-format';
  }
  if (!bindings.every((binding) => binding.stamps.length > 0)) return undefined;
  const held = needsObjectFormat(stamp, bindings) ? holdsObjectBindingsBeside(cache) : holdsSeveralBindings(cache);
  return held ? 'beside' : 'keeps-format';
}

/** Whether binding `stamp` beside `bindings` leaves a binding without a file stamp beside another: a directory cache's format 4. */
function needsObjectFormat(stamp: string, bindings: readonly SliceBinding[]): boolean {
  const objectOnly = (stamps: readonly string[]): boolean => stamps.every((other) => shardStampKind(other) === 'object');
  return objectOnly([stamp]) || bindings.some((binding) => objectOnly(binding.stamps));
}

/** Whether the cache holds an object's binding beside another (manifest format 4: FILE-BINDINGS.md phase 3). A store without the getter: no. */
export function holdsObjectBindingsBeside(cache: ShardCache): boolean {
  return (cache.store as { holdsObjectBindingsBeside?: unknown }).holdsObjectBindingsBeside === true;
}

/** A file stamp's ctime (ns), what the store ranks a binding by past MAX_SLICE_BINDINGS; undefined for another stamp. */
function ctimeOf(stamp: string): bigint | undefined {
  const ctime = parseFileStamp(stamp)?.ctimeNs;
  return ctime === undefined ? undefined : BigInt(ctime);
}

/**
 * Whether a binding with file stamp `stamp` added beside `bindings` would rank last (the store's
 * eviction: the binding whose newest file stamp is the oldest goes, a new one included): the slice
 * is full and every binding holds a file changed more recently. Ties are left to the store.
 */
function ranksLast(bindings: readonly SliceBinding[], stamp: string): boolean {
  const own = ctimeOf(stamp);
  if (bindings.length < MAX_SLICE_BINDINGS || own === undefined) return false;
  return bindings.every((binding) => binding.stamps.some((other) => {
    const ctime = ctimeOf(other);
    return ctime !== undefined && ctime > own;
  }));
}

/** bindBesideOtherFiles' answer where a binding beside would move the cache's format (see allowsSeveralBindings). */
const KEEPS_FORMAT = Symbol('keeps-format');

/**
 * Whether the cache already holds a second binding of some slice (format 3). A load binds beside
 * another file's binding only then: the first second binding moves the cache to manifest format 3,
 * which releases before 0.56 refuse (UNSUPPORTED_FORMAT), and a load must not do that to a cache
 * older loaders share; a build does it, and says so. A store without the getter (a caller's): no.
 * This handle's view may be stale: the store decides again under its writer lock (enqueueRecord's
 * besideOnlyIfSeveral; keptFormatBindings counts what it kept out).
 */
export function holdsSeveralBindings(cache: ShardCache): boolean {
  return (cache.store as { holdsSeveralBindings?: unknown }).holdsSeveralBindings === true;
}

/**
 * Whether a load may bind beside another file's (object's) binding: the store's format gate, as it
 * judges besideOnlyIfSeveral. A local cache: holdsSeveralBindings (manifest format 3 can stay with
 * none held; the store judges by what is held). s3://: cache.json format 2 as the store last read it
 * (layoutFormat; kept 2 after an unbind or gc, where no slice may hold a second binding), or a view
 * that holds a second binding (only format 2 has one; the store reads cache.json again then).
 */
export function allowsSeveralBindings(cache: ShardCache): boolean {
  if (holdsSeveralBindings(cache)) return true;
  return cache.remote && (cache.store as { layoutFormat?: unknown }).layoutFormat === S3_LAYOUT_FORMAT_PER_FILE;
}

/** What a build does for a file a load would bind beside another's in a cache of one binding per slice. */
export const KEEP_FORMAT_REMEDY = "a build of this model binds its tensors beside the other files' (the cache then needs 0.56 or later)";

/** KEEP_FORMAT_REMEDY where the binding beside would be an object's (or beside one): a directory cache's format 4. */
const KEEP_OBJECT_FORMAT_REMEDY = "a build of this model binds its tensors beside the other revisions' (the cache then needs a release after 0.57)";

/** KEEP_FORMAT_REMEDY of an s3:// cache: a build of an s3:// model binds its objects' tensors beside (ETag stamps). */
const S3_KEEP_FORMAT_REMEDY = "a build of this s3:// model binds its tensors beside the other objects' (cache.json then format 2: the cache needs 0.57 or later), or a cache of its own for this revision keeps the revisions' bindings apart";

/** A stale tensor's detail where the format gate kept a load from binding it beside (allowsSeveralBindings; a directory cache's format 4: holdsObjectBindingsBeside). */
function describeKeptFormat(cache: ShardCache, key: string, objectFormat = false): string {
  if (cache.remote) {
    // s3:// (FILE-BINDINGS.md phase 2): the format is cache.json's, which 0.56 and older refuse at 2.
    return `its bytes are entry ${key}'s, of this tensor's name, but a load adds no binding beside another object's to an s3:// cache whose cache.json is format 1 as this cache handle last read it (the first such binding moves it to format 2, which releases up to 0.56 cannot read): ${S3_KEEP_FORMAT_REMEDY}`;
  }
  if (objectFormat) {
    // A directory cache (FILE-BINDINGS.md phase 3): an object's binding beside another is format 4, which 0.57 and older refuse.
    return `its bytes are entry ${key}'s, of this tensor's name, but a load adds no binding of an object beside another binding (or of a file beside an object's) to a cache holding none such (the first moves it to manifest format 4, which releases up to 0.57 cannot read): ${describeBuildRemedy(cache, KEEP_OBJECT_FORMAT_REMEDY)}`;
  }
  return `its bytes are entry ${key}'s, of this tensor's name, but a load adds no binding beside another file's to a cache holding one binding per slice (the first such binding moves it to a format releases before 0.56 cannot read): ${describeBuildRemedy(cache, KEEP_FORMAT_REMEDY)}`;
}

/**
 * Whether bindFoundSlice bound `slice` of `model` to `key` through this store, at the shard's stamp
 * now, while `beside` was bound to `key` already.
 */
function wasMovedHere(store: CacheStore, model: SafetensorsModel, slice: SliceKey, key: string, beside: SliceKey): boolean {
  // What checkShardUnchanged judges bindings by: the stamp now, else (an object, whose ETag has no
  // descriptor to ask; a caller's model wrapper) the one it was opened with.
  let stamp: string | null | undefined;
  try {
    stamp = readShardStamp(model, slice.shardName);
  } catch {
    stamp = undefined;
  }
  stamp ??= model.shards.find((shard) => shard.name === slice.shardName)?.stamp;
  if (typeof stamp !== 'string') return false;
  const recorder = recorders.get(store);
  const id = foundSliceId(slice.shardName, slice.offsetBytes, slice.sizeBytes, stamp);
  // A scan (up to MAX_SLICE_KEYS_PER_ENTRY), on this rare path only: nothing to index per binding.
  const slices = recorder?.found.get(id) === key ? recorder.foundBeside.get(id) : undefined;
  return slices?.some(([shardName, offsetBytes, sizeBytes]) => shardName === beside.shardName && offsetBytes === beside.offsetBytes && sizeBytes === beside.sizeBytes) === true;
}

/** The key of the entry bindFoundSlice bound this slice to, through this store, at this stamp of its shard. */
export function findBoundSlice(store: CacheStore, shardName: string, offsetBytes: number, sizeBytes: number, stamp: string): string | undefined {
  return recorders.get(store)?.found.get(foundSliceId(shardName, offsetBytes, sizeBytes, stamp));
}

function foundSliceId(shardName: string, offsetBytes: number, sizeBytes: number, stamp: string): string {
  return createHash('sha1').update(JSON.stringify([shardName, offsetBytes, sizeBytes, stamp])).digest('base64');
}

/** A raw read of an object store's range that can be made again (an s3:// model's tensor). */
export interface SourceRefetch {
  /** Drops the range's read-through copy and reads it again, into the same bytes; false when nothing could be read anew. */
  refetch(): Promise<boolean>;
  /** Drops the range's read-through copy: bytes found wrong must not outlive the check. */
  dropCopy(): Promise<void>;
  /** The range's bytes were proven damaged (two reads differed): the model's source keeps no more copies, or, the bad bytes served from a copy, serves none (reportModelRangeDamage). */
  reportDamage(): Promise<void>;
}


/** The hint beside a weak file system's checks: the option exists, and why it is rarely right. */
export const WEAK_TRUST_NOTE = "fileSources: 'trust' would serve it unchecked, which is wrong wherever images of one layout take each other's place";

/**
 * A record: a conditional alias the store decides (AliasSliceItem.moveFrom). A checked stamp or a
 * found binding carries its own key as `moveFrom` (from which nothing moves); a rebind
 * (rebindFoundSlice) the stale entry's. Either way a slice another writer bound to a third entry
 * since the check is left to it, answered false: neither recorded nor failed (a plain alias failed
 * SLICE_CONFLICT, counted in `failed` and named in later reports as the handle's last failed record).
 */
type QueuedRecord = AliasSliceItem & { key: string; stamp: string; moveFrom: string };

interface StampRecorder {
  /** Records to make, one aliasSlices call a batch. */
  queue: QueuedRecord[];
  /** Items queued or being recorded, by slice, key and stamp: concurrent loads of one tensor record it once. */
  queued: Set<string>;
  /** The flush in progress; checks that finish meanwhile join its next batch. */
  flushing: Promise<void> | undefined;
  stats: ObjectStampStats;
  /**
   * Shards found to hold other bytes than their binding's entry, by slice, key and stamp: a stamp
   * names one version of a file or object, so the answer holds for the store's lifetime (a rebind
   * changes the key). Bounded: a load of a changed model adds one per tensor.
   */
  mismatched: Set<string>;
  /**
   * Shards found to hold their binding's entry's bytes, the same way: served from the cache by this
   * handle from then on, as a recorded stamp is (the record may fail, or not be read back yet).
   */
  matched: Set<string>;
  /**
   * Slices without a binding found to hold an entry's bytes (bindFoundSlice), by slice and stamp:
   * the entry's key, so that this handle serves them from the cache before (or without) the record.
   */
  found: Map<string, string>;
  /**
   * By the same ids: the slices that entry was bound at when bindFoundSlice bound this one to it
   * (its frozen sliceKeys then: rebindFoundSlice's evidence of a move, wasMovedHere).
   */
  foundBeside: Map<string, CacheEntry['sliceKeys']>;
}

/**
 * The most slices of an entry a found binding keeps as its evidence of a move (foundBeside): the
 * lists kept, one per binding remembered (an s3:// cache's are new at each refresh), stay within
 * MAX_REMEMBERED_CHECKS × this many slice keys. An entry bound at more (a constant many models
 * share) gives no such evidence: a tensor moved off its span stays stale until a build --rebind.
 */
const MAX_BESIDE_SLICES = 64;

/** Checks remembered per store, each way; past this many the oldest go (a later load hashes them again). */
const MAX_REMEMBERED_CHECKS = 100_000;

/** Per store: records wait for the flush in progress, so an s3:// cache lists itself once a batch, not once a tensor. */
const recorders = new WeakMap<CacheStore, StampRecorder>();

function recorderOf(store: CacheStore): StampRecorder {
  let recorder = recorders.get(store);
  if (recorder === undefined) {
    recorder = { queue: [], queued: new Set(), flushing: undefined, stats: { recorded: 0, notKept: 0, failed: 0, droppedBindings: 0, outrankedBindings: 0, keptFormatBindings: 0 }, mismatched: new Set(), matched: new Set(), found: new Map(), foundBeside: new Map() };
    recorders.set(store, recorder);
  }
  return recorder;
}

function rememberCheck(memo: Set<string>, item: AliasSliceItem & { stamp: string }): void {
  const id = checkId(item);
  if (memo.has(id)) return;
  if (memo.size >= MAX_REMEMBERED_CHECKS) memo.delete(memo.values().next().value!);
  memo.add(id);
}

/** Whether a check through this store found the shard (at this stamp) to hold other bytes than the binding's entry. */
export function isKnownMismatch(store: CacheStore, item: AliasSliceItem & { stamp: string }): boolean {
  return recorders.get(store)?.mismatched.has(checkId(item)) === true;
}

/** Whether a check through this store found the shard (at this stamp) to hold the binding's entry's bytes. */
export function isKnownMatch(store: CacheStore, item: AliasSliceItem & { stamp: string }): boolean {
  return recorders.get(store)?.matched.has(checkId(item)) === true;
}

/** A remembered check's id: a digest of its item, so that long shard names do not grow the memo. */
function checkId(item: AliasSliceItem): string {
  return createHash('sha1').update(stampItemId(item)).digest('base64');
}

/** Queues a record once (concurrent loads of one tensor record it once) and starts a flush if none runs. */
function enqueueRecord(store: CacheStore, record: QueuedRecord): StampRecorder {
  const recorder = recorderOf(store);
  const id = recordId(record);
  if (!recorder.queued.has(id)) {
    recorder.queued.add(id);
    // Every record of a load: the store, under its writer lock, adds no binding beside another
    // file's to a cache that holds no second binding then (this handle's view may be stale). Also
    // for a caller's store (wrapCacheStore), which may be opened with sliceBindingsPerFile: a load
    // must never move its format (to manifest format 3, or cache.json format 2).
    recorder.queue.push({ ...record, besideOnlyIfSeveral: true });
  }
  recorder.flushing ??= flushStampQueue(store, recorder);
  return recorder;
}

function queueStamp(store: CacheStore, item: AliasSliceItem & { key: string; stamp: string }): StampRecorder {
  return enqueueRecord(store, { ...item, moveFrom: item.key });
}

function recordId(record: QueuedRecord): string {
  return JSON.stringify([record.moveFrom, stampItemId(record)]);
}

function stampItemId(item: AliasSliceItem): string {
  return JSON.stringify([item.key, item.shardName, item.offsetBytes, item.sizeBytes, item.stamp]);
}

/**
 * Records batches until the queue is empty; never rejects (outcomes go to the recorder's stats).
 * Once a batch has waited the store's lock timeout for a writer lock another live process holds
 * (LOCK_TIMEOUT), the batches queued behind it in this flush fail at once with the same error:
 * each waited the whole timeout again, so a load whose checks ended in two batches kept close(),
 * flushObjectStamps() and a process that never closed waiting twice the documented 30 s.
 */
async function flushStampQueue(store: CacheStore, recorder: StampRecorder): Promise<void> {
  try {
    // Checks finishing within this turn of the event loop share the first batch.
    await new Promise((resolve) => setImmediate(resolve));
    let lockTimeout: unknown;
    while (recorder.queue.length > 0) {
      const records = recorder.queue.splice(0);
      try {
        if (lockTimeout !== undefined) countFailure(recorder.stats, lockTimeout, records.length);
        else {
          const failure = await recordBatch(store, records, recorder.stats);
          if (isStoreError(failure, 'LOCK_TIMEOUT')) lockTimeout = failure;
        }
      } finally {
        // Recorded (or failed): the same stamp checked again later is queued again.
        for (const record of records) recorder.queued.delete(recordId(record));
      }
    }
  } catch {
    // recordBatch settles every store call itself: nothing here is expected to throw.
  } finally {
    recorder.flushing = undefined;
  }
}

/**
 * One aliasSlices call for the batch. A batch the store refuses as a whole for one item (a stamp
 * too long for an S3 object key; a slice another process rebound since the check: the store
 * persists nothing of a batch with a conflict; a rebind's `moveFrom` that a store of an older
 * release ignores, taking it for a plain alias of a bound slice; an entry another writer took to
 * MAX_SLICE_KEYS_PER_ENTRY since the check, SIZE_INVALID) is recorded item by item, so that
 * one item's refusal is its own. A rebind whose slice another writer bound to a third entry is
 * answered false by the store: not counted either way. Returns the last failure (undefined when
 * every call succeeded).
 */
async function recordBatch(store: CacheStore, items: AliasSliceItem[], stats: ObjectStampStats): Promise<unknown> {
  let failure: unknown;
  const count = (outcome: PromiseSettledResult<boolean[]>, batch: readonly AliasSliceItem[]) => {
    if (outcome.status === 'fulfilled') {
      // A caller's wrapper store may answer anything: only `true`s count.
      const bound = Array.isArray(outcome.value) ? batch.filter((_, at) => outcome.value[at] === true) : [];
      const notKept = bound.filter((item) => !isRecordKept(store, item)).length;
      stats.recorded += bound.length - notKept;
      stats.notKept += notKept;
      stats.lastError = undefined;
    } else {
      failure = outcome.reason;
      countFailure(stats, outcome.reason, batch.length);
    }
  };
  // Past MAX_SLICE_BINDINGS the store drops the least recent binding, which may be the one an item
  // adds (outranked: the item is answered false) or another file's (dropped).
  const added = new Set(items.map((item) => JSON.stringify([item.shardName, item.offsetBytes, item.sizeBytes, item.key])));
  const options: AliasSlicesOptions = {
    onBindingDropped: (slice: SliceKeyTuple, key: string) => {
      if (added.has(JSON.stringify([slice[0], slice[1], slice[2], key]))) stats.outrankedBindings++;
      else stats.droppedBindings++;
    },
    // An item besideOnlyIfSeveral kept out (enqueueRecord: every record, a caller's store's too): answered false, counted here.
    onBesideRefused: () => {
      stats.keptFormatBindings++;
    },
  };
  // Called from a promise: a store (a caller's wrapper) that throws synchronously still only rejects.
  const [whole] = await Promise.allSettled([Promise.resolve().then(() => store.aliasSlices(items, options))]);
  const splittable =
    whole.status === 'rejected' &&
    items.length > 1 &&
    (isStoreError(whole.reason, 'INVALID_ARGUMENT') || isStoreError(whole.reason, 'SLICE_CONFLICT') || isStoreError(whole.reason, 'SIZE_INVALID'));
  if (!splittable) {
    count(whole, items);
    return failure;
  }
  const outcomes = await Promise.allSettled(items.map((item) => Promise.resolve().then(() => store.aliasSlices([item], options))));
  outcomes.forEach((outcome, at) => count(outcome, [items[at]!]));
  return failure;
}

/**
 * Whether a record the store answered `true` kept its stamp: the binding holds it after the call,
 * or (a caller's wrapper store whose lookups show something else) the rule would keep it. False for
 * a stamp ranking last past MAX_SLICE_STAMPS (isSliceStampKept), which the store answers `true`.
 */
function isRecordKept(store: CacheStore, item: AliasSliceItem): boolean {
  if (item.stamp === undefined || typeof item.key !== 'string') return true;
  try {
    const stamps = findBindingStamps(store, item.shardName, item.offsetBytes, item.sizeBytes, item.key);
    return stamps === undefined || stamps.includes(item.stamp) || isStampKept(isS3Url(store.root), stamps, item.stamp);
  } catch {
    return true; // a caller's store whose lookups throw: counted as the store answered
  }
}

/** `size` records failed with `reason` (the handle's last error until a record succeeds). */
function countFailure(stats: ObjectStampStats, reason: unknown, size: number): void {
  stats.failed += size;
  stats.lastError = describeError(reason);
}

/** Waits for the records queued so far (and those queued meanwhile); what they came to. */
export async function flushObjectStamps(store: CacheStore): Promise<ObjectStampStats> {
  const recorder = recorderOf(store);
  while (recorder.flushing !== undefined) await recorder.flushing;
  return { ...recorder.stats };
}
