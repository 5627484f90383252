import { errnoCode } from '@splitzip/store';
import { describeLockTimeout } from './describe-lock-timeout.js';
import { quoteForShell } from './quote-for-shell.js';
import { formatBytes } from './format-units.js';

// Turns any error (ours, another package's typed error, a Node system error) into one clear line
// naming the file and the tensor where known. The CLI prints it; `--debug` adds the stack.

interface ErrorLike {
  message?: unknown;
  code?: unknown;
  file?: unknown;
  path?: unknown;
  tensor?: unknown;
  entry?: unknown;
  context?: unknown;
  details?: unknown;
  syscall?: unknown;
}

const SYSTEM_ERRORS: Record<string, string> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ENOSPC: 'no space left on device',
  EDQUOT: 'disk quota exceeded',
  EROFS: 'read-only file system',
  ENOTDIR: 'not a directory',
  EISDIR: 'is a directory',
  EEXIST: 'already exists',
  EMFILE: 'too many open files',
  EIO: 'input/output error',
};

/** `no manifest.json in it`: the file the cache lacks, its directory said already (a long path read three times); a file elsewhere whole. */
function describeMissingFile(file: string, dir: string): string {
  const name = file.startsWith(`${dir}/`) || file.startsWith(`${dir}\\`) ? file.slice(dir.length + 1) : '';
  return name !== '' && !/[/\\]/.test(name) ? `no ${name} in it` : `${file} does not exist`;
}

/** A first build's leftovers by name, at most MAX_LEFTOVERS_NAMED of them (temp files can be many). */
function describeLeftovers(leftovers: unknown[]): string {
  const names = leftovers.filter((name): name is string => typeof name === 'string');
  const shown = names.slice(0, MAX_LEFTOVERS_NAMED).join(', ');
  return names.length > MAX_LEFTOVERS_NAMED ? `${shown} and ${names.length - MAX_LEFTOVERS_NAMED} more` : shown;
}

/** Names listed in an interrupted first build's line: enough to recognise it, short enough for one line. */
const MAX_LEFTOVERS_NAMED = 4;

export function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const e = error as Error & ErrorLike;
  const context = {
    ...(isRecord(e.details) ? e.details : {}),
    ...(isRecord(e.context) ? e.context : {}),
  } as Record<string, unknown>;
  const file = firstString(e.file, context.file, e.path, context.path);
  const tensor = firstString(e.tensor, context.tensor, context.name);
  const entry = firstString(e.entry, context.entry);
  const code = typeof e.code === 'string' ? e.code : undefined;

  let message = e.message || e.name;
  // The other packages' errors say their code first ("NOT_A_CACHE: …"); the builder's own say it too,
  // so a user can look it up (README) or match it in a script. A usage error and an interruption
  // are not looked up: their lines say what to do. One that wraps another's already leads with that one's code.
  if (e.name === 'BuilderError' && code !== undefined && code !== 'INTERRUPTED' && !/^[A-Z][A-Z0-9_]*: /.test(message)) message = `${code}: ${message}`;
  if (code && SYSTEM_ERRORS[code] && typeof e.syscall === 'string') {
    // Node's "ENOSPC: no space left on device, write" reads poorly; say it plainly.
    message = `${SYSTEM_ERRORS[code]}${file ? `: ${file}` : ''}`;
  }
  // Set where the message names the file in its own words (no "(file …)" suffix then).
  let fileSaid = false;
  if (code === 'NOT_A_CACHE' && file) {
    fileSaid = true;
    // The store words this for library callers ("open with create: true"); a CLI user needs the command.
    const dir = file.replace(/[/\\](manifest|cache)\.json$/, '');
    // A model's directory given as the cache (openExistingCache marks it): building into it would put
    // the cache's files beside the shards; checking a cache against it is what was likely meant
    // (verify, whatever the command: `gc --model` would remove bindings, not check them).
    message = context.reason === 'model-directory'
      ? `NOT_A_CACHE: ${dir} is not a SplitZip cache: it looks like a model directory: it holds ${describeModelFiles(context.modelFiles)}, and no manifest.json; to check a cache against this model: \`splitzip verify <cache> --model ${quoteForShell(dir)}\``
      : context.reason === 'interrupted-first-build' && Array.isArray(context.leftovers)
      ? `NOT_A_CACHE: ${dir} is not a SplitZip cache yet: a first build into it stopped before its first commit (it left ${describeLeftovers(context.leftovers)}, and no manifest.json); \`splitzip build <model> --out ${quoteForShell(dir)}\` starts it again and removes them`
      : context.reason === 'parent-is-file' && typeof context.parentFile === 'string'
      ? `NOT_A_CACHE: ${dir} is not a SplitZip cache: it does not exist, and a parent of it, ${context.parentFile}, is a file, not a directory`
      : /not a directory/.test(e.message)
      ? `NOT_A_CACHE: ${dir} is not a SplitZip cache (it is a file, not a directory)`
      : `NOT_A_CACHE: ${dir} is not a SplitZip cache (${describeMissingFile(file, dir)}); \`splitzip build <model> --out ${quoteForShell(dir)}\` makes one`;
  }
  if (code === 'LOCK_TIMEOUT' && file) {
    const line = describeLockTimeout(file, context);
    if (line !== undefined) {
      message = line;
      fileSaid = true;
    }
  }
  // Not for something other than a file in the manifest's place (a directory, a FIFO): no build repairs that.
  // Nor for an older copy put back (its manifest reads fine, and its message names the way out).
  if (code === 'MANIFEST_INVALID' && file && /manifest\.json$/.test(file) && context.reason !== 'not-a-file' && context.reason !== 'older-copy') {
    // Every other command refuses such a cache: the line says the way out.
    const dir = file.replace(/[/\\]manifest\.json$/, '');
    message += `; the cache's index of entries cannot be read: \`splitzip build <model> --out ${quoteForShell(dir)} --repair\` keeps the entries that still check out and binds the model's tensors again`;
  }
  message = dropRepeats(message);
  const extra: string[] = [];
  if (file && !fileSaid && !mentions(message, file)) extra.push(`file ${file}`);
  if (tensor && !mentions(message, tensor)) extra.push(`tensor ${tensor}`);
  if (entry && !mentions(message, entry)) extra.push(`entry ${entry}`);
  if (extra.length > 0) message += ` (${extra.join(', ')})`;
  const committed = describeCommitted(context.committed);
  if (committed !== undefined) message += `; ${committed}`;
  return message.replace(/\s*\n\s*/g, ' ');
}

/**
 * What a message says twice where a package's words and Node's follow each other, each leading
 * with the code: `file system error EACCES: EACCES: permission denied, open '/m/x'` after
 * `IO_ERROR: /m/x: ` says the code once, and the file once (Node's `, open '<path>'` goes where the
 * line names that path already).
 */
export function dropRepeats(message: string): string {
  const once = message.replace(/\b([A-Z][A-Z0-9_]*): (?=\1: )/g, '');
  return once.replace(/, [a-z]+ '([^']+)'/g, (said: string, path: string) => (mentions(once.replace(said, ''), path) ? '' : said));
}

/**
 * The Node system error code (ENOSPC, EACCES, ...) of an error or of its causes. The store's
 * NO_SPACE (a full disk or quota) counts as its errno (`details.errno`; ENOSPC where it names
 * none), so it reads as NO_SPACE even where its system error did not come along as `cause`.
 */
export function systemErrorCode(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    // The store's reading of a code: it names the errnos libuv does not ("Unknown system error -122": EDQUOT).
    const code = errnoCode(e);
    if (code !== undefined && /^E[A-Z]+$/.test(code)) return code;
    if (code === 'NO_SPACE') {
      const errno = (e as { details?: { errno?: unknown } }).details?.errno;
      return typeof errno === 'string' && NO_SPACE_CODES.has(errno) ? errno : 'ENOSPC';
    }
  }
  return undefined;
}

/** The codes of a full disk or quota: NO_SPACE, whatever the write that met them. */
export const NO_SPACE_CODES: ReadonlySet<string> = new Set(['ENOSPC', 'EDQUOT']);

/** A system error code in plain words ("no space left on device"), or the code itself. */
export function describeSystemCode(code: string): string {
  return SYSTEM_ERRORS[code] ?? code;
}

/** Characters that continue a name: a mention must not have one on either side. */
const NAME_CHAR = /[\p{L}\p{N}_./-]/u;

/**
 * Whether `message` names `name` as a whole word: a tensor called `a` is not named by "cannot
 * write the blob" (a substring test dropped it from such messages).
 */
export function mentions(message: string, name: string): boolean {
  for (let at = message.indexOf(name); at !== -1; at = message.indexOf(name, at + 1)) {
    const before = at > 0 ? message[at - 1]! : '';
    const after = message[at + name.length] ?? '';
    if (!(before && NAME_CHAR.test(before)) && !(after && NAME_CHAR.test(after))) return true;
  }
  return false;
}

/**
 * A failed build's `context.committed` (BuildCommitted): what the tensors before the failure wrote,
 * which the cache keeps (a SLICE_CONFLICT at a later shard left an earlier shard's entries and
 * bindings, said nowhere: user probe p3). Each kind of change apart, only those it made: a file
 * stamp added to a binding already there or a blob put back is no new entry or binding. Undefined
 * where the error carries none.
 */
function describeCommitted(value: unknown): string | undefined {
  if (!isRecord(value)) return undefined;
  const count = (key: string): number => (typeof value[key] === 'number' ? (value[key] as number) : 0);
  const entries = count('entries');
  const bindings = count('bindings');
  const stamps = count('stampsAdded');
  const repaired = count('blobsRepaired');
  const removed = count('bindingsRemoved');
  const parts = [
    ...(entries > 0 ? [`${entries} new ${entries === 1 ? 'entry' : 'entries'} (${formatBytes(count('storedBytes'))})`] : []),
    ...(bindings > 0 ? [`${bindings} new slice ${bindings === 1 ? 'binding' : 'bindings'}`] : []),
    ...(stamps > 0 ? [`${stamps === 1 ? 'a stamp on 1 slice binding' : `stamps on ${stamps} slice bindings`} already there (no new binding)`] : []),
    ...(repaired > 0 ? [`${repaired} ${repaired === 1 ? 'blob' : 'blobs'} put back (${formatBytes(count('repairedBytes'))})`] : []),
    ...(removed > 0 ? [`${removed} ${removed === 1 ? 'binding' : 'bindings'} removed`] : []),
  ];
  if (parts.length === 0) return undefined;
  const said = parts.length > 1 ? `${parts.slice(0, -1).join(', ')} and ${parts.at(-1)!}` : parts[0]!;
  return `the cache changed before the failure: this build committed ${said}, which stay in it`;
}

function describeModelFiles(files: unknown): string {
  const names = Array.isArray(files) ? files.filter((f): f is string => typeof f === 'string') : [];
  if (names.length === 0) return 'safetensors files';
  return names.length > 3 ? `${names.slice(0, 3).join(', ')} and ${names.length - 3} more` : names.join(', ');
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

function firstString(...values: unknown[]): string | undefined {
  for (const value of values) if (typeof value === 'string' && value.length > 0) return value;
  return undefined;
}
