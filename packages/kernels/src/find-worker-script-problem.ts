import { statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * Why a worker script, a `file:` URL or a path, is no file a `Worker` can start from:
 * - `not-local`: the URL names no local file (`fileURLToPath` refused it: another host, a
 *   non-`file:` URL), `message` its words;
 * - `unreadable`: nothing can be stat'ed there, `code` the errno code (`ENOENT`, `EACCES`) or
 *   `'stat failed'`;
 * - `not-a-file`: something else is there (a directory).
 */
export type WorkerScriptProblem =
  | { readonly reason: 'not-local'; readonly message: string }
  | { readonly reason: 'unreadable'; readonly code: string; readonly path: string }
  | { readonly reason: 'not-a-file'; readonly path: string };

/**
 * The one rule both the kernels' worker decoder (`createWorkerDecoder`'s `workerUrl`) and the
 * runtime's decode threads (`createThreadDecoder`'s `workerUrl`) check a worker script by, at
 * creation (one stat): a missing script was taken, and every worker died at start. Returns the
 * problem, or undefined for a regular file; each caller words it and throws its own typed error.
 * A script removed later still kills its workers then. A relative path is looked up from the
 * working directory, as `Worker` does.
 */
export function findWorkerScriptProblem(script: URL | string): WorkerScriptProblem | undefined {
  let path: string;
  try {
    path = script instanceof URL ? fileURLToPath(script) : script;
  } catch (error) {
    return { reason: 'not-local', message: (error as Error).message };
  }
  let isFile: boolean;
  try {
    isFile = statSync(path).isFile();
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    return { reason: 'unreadable', code: typeof code === 'string' ? code : 'stat failed', path };
  }
  return isFile ? undefined : { reason: 'not-a-file', path };
}
