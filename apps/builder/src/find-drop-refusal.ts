// Whether `gc --drop-unbound-entries` would be refused now, in the store's own words: its dry run
// (a look: no lock, nothing changed) answers with the error the real drop would fail with.
import { isStoreError, type CacheStore } from '@splitzip/store';

/** The store's refusal of dropUnboundEntries: its error's code and message (as `--json` errors and verify's problems name them). */
export interface DropRefusal {
  code: string;
  message: string;
  /** The store error's details (a damaged manifest's kept copy: reason 'damaged-copy-kept', keptCopies). */
  details?: Record<string, unknown>;
}

/**
 * The store's refusal of a drop now (a damaged manifest's kept copy: MANIFEST_INVALID; a damaged
 * journal: JOURNAL_INVALID; a store that cannot drop, such as an s3:// one before it could:
 * its own error), or null where its dry run answers with a report. Asked of the store rather than
 * judged from the cache's kind, so that a store that learns to drop is reported as dropping.
 * `minAgeMs`: s3:// only, inspect --min-age (the store's default where absent), as gc's would judge
 * (since 2026-12-07 an s3:// drop refuses no cache written to lately: no `recent-writes`).
 * Errors that are not the store's (a bug) are thrown.
 */
export async function findDropRefusal(store: CacheStore, options: { minAgeMs?: number | undefined } = {}): Promise<DropRefusal | null> {
  try {
    await store.dropUnboundEntries({ dryRun: true, ...(options.minAgeMs === undefined ? {} : { minAgeMs: options.minAgeMs }) });
    return null;
  } catch (error) {
    if (!isStoreError(error)) throw error;
    return { code: error.code, message: error.message, details: error.details };
  }
}
