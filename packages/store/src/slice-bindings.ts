// The rule of one binding per file (FILE-BINDINGS.md): how a slice's bindings change under one
// journal op, as a pure function of the bindings before it, so that planning, applying and
// replaying (a journal, after a crash) all reach the same bindings.
import { parseFileStamp } from '@splitzip/safetensors';
import { isStoreError } from './errors.js';
import { compareDecimalDigits, fileStampChangeTimeNs } from './file-stamp-change-time.js';
import { MAX_SLICE_BINDINGS } from './limits.js';
import { shardStampKind } from './shard-stamp-kind.js';

/** Who a slice is bound to, and the shard stamps recorded with the binding. */
export interface SliceOwner {
  key: string;
  stamps: readonly string[] | undefined;
}

const NO_STAMPS: readonly string[] = Object.freeze([]);

/** Whether `stamps` hold a local file's stamp (shardStampKind 'file'). */
export function hasFileStamp(stamps: readonly string[] | undefined): boolean {
  return stamps !== undefined && stamps.some((stamp) => shardStampKind(stamp) === 'file');
}

/** Whether `stamps` hold an object's stamp (shardStampKind 'object': an s3:// model's ETag). */
export function hasObjectStamp(stamps: readonly string[] | undefined): boolean {
  return stamps !== undefined && stamps.some((stamp) => shardStampKind(stamp) === 'object');
}

/**
 * Which bindings a slice may hold beside others: `true`, those with a file stamp (manifest format 3,
 * journal version 2); 'objects', those with a file or an object stamp (format 4, version 3:
 * FILE-BINDINGS.md phase 3); false, none (one binding per slice).
 */
export type BindingsPerFile = boolean | 'objects';

/** Whether a binding with `stamps` may stand beside others under `level`. */
function mayStandBeside(stamps: readonly string[] | undefined, level: BindingsPerFile): boolean {
  return hasFileStamp(stamps) || (level === 'objects' && hasObjectStamp(stamps));
}

/** Whether these bindings of one slice need format 4: several, one of them without a file stamp. */
export function holdsObjectBindingBeside(bindings: readonly SliceOwner[]): boolean {
  return bindings.length > 1 && bindings.some((binding) => !hasFileStamp(binding.stamps));
}

/** The newest change time (ns, decimal digits) among a binding's file stamps (fileStampChangeTimeNs); '' where none has one. */
function newestCtimeNs(stamps: readonly string[] | undefined): string {
  let newest = '';
  for (const stamp of stamps ?? NO_STAMPS) {
    const ns = fileStampChangeTimeNs(stamp);
    if (compareDecimalDigits(ns, newest) > 0) newest = ns;
  }
  return newest;
}

/**
 * Recency order, latest first. A binding counts as recorded when its file last changed: its newest
 * file stamp's ctime (then its key, for ties). Derived from the stamps the manifest and journal
 * already hold, it needs no field of its own, so a compaction, a replay after a crash and a
 * salvage all order (and evict) alike; a ctime no tool can set, and a file bound again after it
 * changed has a newer one.
 */
export function compareBindingRecency(a: SliceOwner, b: SliceOwner): number {
  const byTime = compareDecimalDigits(newestCtimeNs(b.stamps), newestCtimeNs(a.stamps));
  return byTime !== 0 ? byTime : a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

/**
 * The rule of one binding per file that a slice's bindings break (SLICE_CONFLICT details.reason,
 * for a manifest's or journal's own bindings): more than MAX_SLICE_BINDINGS; a binding beside
 * another without a file stamp; one stamp held by two bindings; a second binding where the format
 * holds one (manifest format 2, journal version 1).
 */
export type BindingRule = 'too-many-bindings' | 'binding-without-file-stamp' | 'stamp-held-twice' | 'second-binding-in-format-2';

/**
 * The rule these bindings of one slice break (undefined: none): at most MAX_SLICE_BINDINGS; beyond
 * one, each with a file stamp (with `level` 'objects': or an object stamp) and no stamp held twice.
 */
export function findBindingSetProblem(bindings: readonly SliceOwner[], level: BindingsPerFile = true): BindingRule | undefined {
  if (bindings.length <= 1) return undefined;
  if (bindings.length > MAX_SLICE_BINDINGS) return 'too-many-bindings';
  const seen = new Set<string>();
  for (const binding of bindings) {
    if (!mayStandBeside(binding.stamps, level)) return 'binding-without-file-stamp';
    for (const stamp of binding.stamps!) {
      if (seen.has(stamp)) return 'stamp-held-twice';
      seen.add(stamp);
    }
  }
  return undefined;
}

const BINDING_RULES: ReadonlySet<unknown> = new Set<BindingRule>(['too-many-bindings', 'binding-without-file-stamp', 'stamp-held-twice', 'second-binding-in-format-2']);

/**
 * `{ [field]: rule }` where `error` is a SLICE_CONFLICT naming the BindingRule a manifest's or
 * journal's own bindings break, else {}: what a MANIFEST_INVALID (entryReason) or JOURNAL_INVALID
 * (opReason) wrapping it carries, its own details.reason being 'entry-invalid' / 'invalid-ops'.
 */
export function bindingRuleOf(error: unknown, field: 'entryReason' | 'opReason'): Partial<Record<typeof field, BindingRule>> {
  if (!isStoreError(error, 'SLICE_CONFLICT') || !BINDING_RULES.has(error.details.reason)) return {};
  return { [field]: error.details.reason as BindingRule };
}

/** Whether one slice may hold these bindings at once (findBindingSetProblem finds none). */
export function isValidBindingSet(bindings: readonly SliceOwner[], level: BindingsPerFile = true): boolean {
  return findBindingSetProblem(bindings, level) === undefined;
}

/** One journal op's effect on a slice's bindings. */
export type BindingStep =
  | {
      ok: true;
      /** The bindings after the op, latest first. */
      bindings: SliceOwner[];
      /** Keys whose binding the op dropped (past MAX_SLICE_BINDINGS, or left without a file stamp), not moved by a rebind. */
      dropped: string[];
      /** The op added a binding beside other entries' (only a format-3 cache may hold that). */
      added: boolean;
      /**
       * The op would have taken a binding beside other entries' (a handle may only with
       * sliceBindingsPerFile), whether it took one (`added`) or ranked last past MAX_SLICE_BINDINGS
       * (`outranked`).
       */
      beside: boolean;
      /** The op's own binding ranked least recent past MAX_SLICE_BINDINGS: `bindings` are those before it, `dropped` its key; the op changes nothing. */
      outranked: boolean;
    }
  | {
      ok: false;
      boundKey: string;
      /** Why no binding beside the others: `boundKey` holds one of the stamps, or a binding (new or there) has no file stamp. */
      rule: 'stamp-held-twice' | 'binding-without-file-stamp';
    };

/**
 * The bindings of a slice after an op binding it to `key` with `stamps` (the binding's whole list,
 * as journalled):
 * - `key` bound already: its stamps become `stamps`, which leave every other binding (a stamp is
 *   one file's bytes); one left without a file stamp is dropped (with `leftLevel` 'objects': one
 *   left with neither a file nor an object stamp).
 * - unbound: bound.
 * - bound to others ('alias'): a binding beside theirs when `stamps` hold a file stamp, no binding
 *   holds any of `stamps`, and each has a file stamp; past MAX_SLICE_BINDINGS the least recent of
 *   all goes, the new one included (then `outranked`: nothing changes).
 *   Otherwise not ok: `boundKey` is in the way.
 * - bound to others ('rebind'): the bindings holding any of `stamps` are moved to `key` (only those,
 *   where `stamps` hold a file stamp and some binding holds one of them); else, where `stamps` hold
 *   a file stamp and some bindings record no other inode's (the file before it changed in place, or
 *   no file stamp), those; else every binding (bindingsMovedBy).
 */
export function stepSliceBindings(
  current: readonly SliceOwner[],
  kind: 'alias' | 'rebind',
  key: string,
  stamps: readonly string[] | undefined,
  level: BindingsPerFile = true,
  leftLevel: BindingsPerFile = level,
): BindingStep {
  const incoming = stamps ?? NO_STAMPS;
  const mine: SliceOwner = { key, stamps };
  if (current.length === 0) return { ok: true, bindings: [mine], dropped: [], added: false, beside: false, outranked: false };
  const holds = (binding: SliceOwner): boolean => binding.stamps !== undefined && binding.stamps.some((stamp) => incoming.includes(stamp));
  if (current.some((binding) => binding.key === key)) {
    const dropped: string[] = [];
    const others: SliceOwner[] = [];
    for (const binding of current) {
      if (binding.key === key) continue;
      if (!holds(binding)) {
        others.push(binding);
        continue;
      }
      const left = binding.stamps!.filter((stamp) => !incoming.includes(stamp));
      // By `leftLevel`, the level of the journal the op goes to (StateDraft's leftLevelOf): one left
      // with only an object stamp stays only in a format-4 cache; a version-2 journal's op drops it,
      // as 0.57 did live, so the planning, the applying (applyChecked) and a replay agree.
      if (mayStandBeside(left, leftLevel)) others.push({ key: binding.key, stamps: Object.freeze(left) });
      else dropped.push(binding.key);
    }
    return { ok: true, bindings: [mine, ...others].sort(compareBindingRecency), dropped, added: false, beside: false, outranked: false };
  }
  const holders = current.filter(holds);
  const besideIncoming = mayStandBeside(incoming, level);
  if (kind === 'alias') {
    if (!besideIncoming || holders.length > 0 || !current.every((binding) => mayStandBeside(binding.stamps, level))) {
      return { ok: false, boundKey: (holders[0] ?? current[0]!).key, rule: besideIncoming && holders.length > 0 ? 'stamp-held-twice' : 'binding-without-file-stamp' };
    }
    // Ranked with the others: past MAX_SLICE_BINDINGS the least recent of all goes, the new one
    // included (a file that changed long ago, bound now, does not push out one that changed since).
    // A binding without a file stamp (an object's) has no change time here: never outranked (ranked
    // by key it would be refused at random), the least recent of the others goes (phase 3).
    const objectOnly = !hasFileStamp(incoming);
    const kept = objectOnly ? [...current].sort(compareBindingRecency) : [...current, mine].sort(compareBindingRecency);
    const dropped = kept.splice(objectOnly ? MAX_SLICE_BINDINGS - 1 : MAX_SLICE_BINDINGS).map((binding) => binding.key);
    if (objectOnly) {
      kept.push(mine);
      kept.sort(compareBindingRecency);
    }
    if (dropped.includes(key)) return { ok: true, bindings: [...current].sort(compareBindingRecency), dropped: [key], added: false, beside: true, outranked: true };
    return { ok: true, bindings: kept, dropped, added: true, beside: true, outranked: false };
  }
  const moved = bindingsMovedBy(current, incoming);
  const kept = current.filter((binding) => !moved.includes(binding));
  return { ok: true, bindings: [mine, ...kept].sort(compareBindingRecency), dropped: [], added: false, beside: false, outranked: false };
}

/**
 * The bindings a rebind to `incoming` stamps moves (a pure function of the bindings and the op, as
 * a replay needs): those holding one of `incoming`; else, where `incoming` holds a file stamp, those
 * recording no file stamp of another inode (this file's before it changed in place, or without a
 * file stamp), leaving other files' beside, so that a move off this file's stale binding (moveFrom)
 * is one op; else (none such, or no file stamp coming) every binding, as with one binding per slice.
 */
export function bindingsMovedBy(current: readonly SliceOwner[], incoming: readonly string[]): readonly SliceOwner[] {
  // The bindings holding one of the stamps (a file's or, phase 3, an object's): only those.
  const holders = current.filter((binding) => binding.stamps?.some((stamp) => incoming.includes(stamp)));
  if (holders.length > 0) return holders;
  if (!hasFileStamp(incoming)) return current;
  const inodes = new Set(incoming.map((stamp) => parseFileStamp(stamp)?.inode).filter((inode) => inode !== undefined));
  if (inodes.size === 0) return current;
  const ofThisFile = current.filter((binding) => !(binding.stamps ?? NO_STAMPS).some((stamp) => {
    const inode = parseFileStamp(stamp)?.inode;
    return inode !== undefined && !inodes.has(inode);
  }));
  return ofThisFile.length > 0 ? ofThisFile : current;
}

/**
 * This file's binding where the slice has exactly one (for `stamps` holding a file stamp): the one
 * holding one of them, else the one recording only this inode's file stamps or none. Another file's
 * (another inode's) never, even a slice's only binding: a moveFrom naming it binds beside it.
 */
export function bindingOfThisFile(current: readonly SliceOwner[], stamps: readonly string[] | undefined): string | undefined {
  const incoming = stamps ?? NO_STAMPS;
  if (!hasFileStamp(incoming)) return undefined;
  const moved = bindingsMovedBy(current, incoming);
  // bindingsMovedBy falls back to every binding where none is this file's: not this file's then.
  const own = moved.filter((binding) => binding.stamps?.some((stamp) => incoming.includes(stamp)) || !holdsOtherInode(binding, incoming));
  return own.length === 1 ? own[0]!.key : undefined;
}

/** Whether a binding records a file stamp of another inode than `incoming`'s file stamps. */
function holdsOtherInode(binding: SliceOwner, incoming: readonly string[]): boolean {
  const inodes = new Set(incoming.map((stamp) => parseFileStamp(stamp)?.inode).filter((inode) => inode !== undefined));
  return (binding.stamps ?? NO_STAMPS).some((stamp) => {
    const inode = parseFileStamp(stamp)?.inode;
    return inode !== undefined && !inodes.has(inode);
  });
}

/**
 * The binding a conflicting alias would move (AliasSliceItem.moveFrom names it): the one holding
 * one of `stamps`, else the only one of this file (bindingsMovedBy), else a slice's only binding;
 * undefined where a rebind would move several.
 */
export function bindingInTheWay(current: readonly SliceOwner[], stamps: readonly string[] | undefined): string | undefined {
  const moved = bindingsMovedBy(current, stamps ?? NO_STAMPS);
  if (moved.length === 1) return moved[0]!.key;
  return current.length === 1 ? current[0]!.key : undefined;
}
