import type { BindingsPerFile } from './slice-bindings.js';
import type { JournalFile } from './backend.js';
import {
  JOURNAL_HEADER_BYTES,
  JOURNAL_RECORD_HEADER_BYTES,
  findRecordMagic,
  framedRecordBytes,
  isIntactRecord,
  scanJournalRecords,
  type JournalRecord,
} from './journal-format.js';
import { JOURNAL_READ_WINDOW_BYTES } from './limits.js';
import type { StoreState } from './store-state.js';
import { withSliceKeys } from './validate-entry.js';

/** What salvageJournalRecords applied and left out. */
export interface JournalSalvage {
  salvagedRecords: number;
  droppedRecords: number;
  droppedOps: number;
  /** The journal ends with a seal (a compaction began from it): its records are in the next manifest once that is written. */
  sealed: boolean;
}

/**
 * Applies to `state` the intact records (magic, length, CRC, content) of `journal` from `fromOffset`
 * on (with `entriesOnly`, only their entries, without bindings), skipping damaged ones, each op on its own (one that no longer applies is left out): what
 * recoverDamagedJournal keeps past the damage, and what recoverDamagedManifest keeps of the journal
 * beside a damaged manifest. Stops at a seal (nothing is appended after one).
 */
export async function salvageJournalRecords(
  journal: JournalFile,
  fromOffset: number,
  state: StoreState,
  { entriesOnly = false, bindingsPerFile = false }: { entriesOnly?: boolean; bindingsPerFile?: BindingsPerFile } = {},
): Promise<JournalSalvage> {
  const size = await journal.size();
  let salvagedRecords = 0;
  let droppedRecords = 0;
  let droppedOps = 0;
  let sealed = false;
  const context = { source: 'a damaged journal', path: journal.path };
  let at: number | undefined = Math.max(fromOffset, JOURNAL_HEADER_BYTES);
  while (at !== undefined && at < size) {
    const total = size - at >= JOURNAL_RECORD_HEADER_BYTES ? framedRecordBytes(await journal.read(at, JOURNAL_RECORD_HEADER_BYTES)) : undefined;
    const bytes = total !== undefined && at + total <= size ? await journal.read(at, total) : undefined;
    let records: JournalRecord[] | undefined;
    if (bytes !== undefined && isIntactRecord(bytes)) {
      try {
        records = scanJournalRecords(bytes, at, journal.path).records;
      } catch {
        records = undefined; // a valid CRC over content that is not ops
      }
    }
    if (records === undefined || records.length !== 1) {
      droppedRecords += 1;
      at = await findIntactRecordAfter(journal, at, size);
      continue;
    }
    const ops = records[0]!.ops;
    if (ops.some((op) => op.kind === 'seal')) {
      sealed = true;
      break;
    }
    for (const op of ops) {
      // entriesOnly: the entries a journal added, without their bindings (recoverDamagedManifest, for
      // a journal judged superseded: an entry is content-addressed and checked against its blob, a
      // binding is not to be brought back).
      if (entriesOnly && op.kind !== 'add') continue;
      try {
        state.applyOps([entriesOnly && op.kind === 'add' ? { ...op, entry: withSliceKeys(op.entry, []) } : op], context, bindingsPerFile);
      } catch {
        droppedOps += 1;
      }
    }
    salvagedRecords += 1;
    at += total!;
  }
  return { salvagedRecords, droppedRecords, droppedOps, sealed };
}

/**
 * The offset of the first intact record (magic, length, CRC) in `journal` after `fromOffset`, below
 * `sizeBytes`; undefined when none. Reads window by window, and each candidate record alone (at most
 * MAX_JOURNAL_RECORD_BYTES): memory stays bounded whatever the file holds.
 */
export async function findIntactRecordAfter(journal: JournalFile, fromOffset: number, sizeBytes: number): Promise<number | undefined> {
  // Windows overlap by 3 bytes, so a magic that straddles one's end is whole in the next.
  const step = JOURNAL_READ_WINDOW_BYTES - 3;
  for (let start = fromOffset + 1; start < sizeBytes; start += step) {
    const window = await journal.read(start, Math.min(JOURNAL_READ_WINDOW_BYTES, sizeBytes - start));
    for (const at of findRecordMagic(window, 0)) {
      if (at >= step && start + step < sizeBytes) break; // the next window sees it
      const offset = start + at;
      const total = framedRecordBytes(await journal.read(offset, Math.min(12, sizeBytes - offset)));
      if (total === undefined || offset + total > sizeBytes) continue;
      if (isIntactRecord(await journal.read(offset, total))) return offset;
    }
  }
  return undefined;
}

