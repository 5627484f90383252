/**
 * Calls a caller's notification hook (AddEntryInput.onPayloadWritten). What it throws is ignored:
 * a hook runs in the middle of a commit, which must complete (or fail) on its own terms.
 */
export function callHook(hook: () => void): void {
  try {
    hook();
  } catch {
    // Documented as ignored: the commit goes on.
  }
}
