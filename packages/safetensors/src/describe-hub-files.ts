import { constants } from 'node:fs';
import { lstat, open, readlink, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { quoteValue } from './quote-value.js';

/**
 * Words for the Hugging Face hub cache's own files where a model open fails on them
 * (`models--org--name/{blobs/<sha256>, snapshots/<rev>/<name> -> ../../blobs/<sha256>, refs/main}`):
 * a snapshot link whose blob is still downloading, a ref file, the repository directory. Read only
 * on the failure path; undefined (or '') where there is nothing to add.
 */

/** A ref file holds one revision (40 hex digits, maybe a newline): anything longer is not one. */
const MAX_REF_FILE_BYTES = 64;
const REVISION = /^[0-9a-f]{40}$/;
/** What huggingface_hub names a blob while it downloads: the link to it already exists. */
const INCOMPLETE_SUFFIX = '.incomplete';
/**
 * O_NONBLOCK: a FIFO (or a link to one, or a device) at refs/main opens at once and fails the
 * regular-file check, where a plain open(2) waited for a writer forever and the error never came.
 */
const REF_OPEN_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK;
/** A link target is at most PATH_MAX (4096) bytes: quoted whole, while the line stays bounded. */
const MAX_TARGET_CHARS = 8200;

async function stateOf(path: string): Promise<string | undefined> {
  return stat(path).then(
    () => undefined,
    (error: NodeJS.ErrnoException) => error.code ?? 'EIO',
  );
}

/**
 * For a path that stat refused with ENOENT or ELOOP: `a symbolic link to <target> (<absolute>), which
 * does not exist` (and, where `<absolute>.incomplete` lies beside it, that its download is unfinished),
 * or `a loop of symbolic links`. Undefined where the path is not itself a link.
 */
export async function describeBrokenLink(path: string): Promise<string | undefined> {
  const info = await lstat(path).catch(() => undefined);
  if (!info?.isSymbolicLink()) return undefined;
  const target = await readlink(path).catch(() => undefined);
  if (target === undefined) return undefined;
  const failure = await stateOf(path);
  // Quoted: a target is any bytes (a newline, an escape sequence), and the message is one line.
  const quote = (value: string): string => quoteValue(value, MAX_TARGET_CHARS);
  if (failure === 'ELOOP') return `a loop of symbolic links (it links to ${quote(target)}, and following the links never reaches a file) (ELOOP)`;
  const absolute = resolve(dirname(path), target);
  const named = absolute === target ? quote(target) : `${quote(target)} (${quote(absolute)})`;
  const incomplete = (await lstat(absolute + INCOMPLETE_SUFFIX).catch(() => undefined)) !== undefined;
  const download = incomplete
    ? `; ${quote(basename(absolute) + INCOMPLETE_SUFFIX)} lies beside that target: its download is unfinished (let it finish, or download the model again)`
    : '';
  return `a symbolic link to ${named}, which does not exist (${failure ?? 'ENOENT'})${download}`;
}

/** The hub repository `dir` is (it holds snapshots/ and refs/ or blobs/), or the refs/ of; undefined otherwise. */
async function findHubRepo(dir: string): Promise<{ repo: string; part: string } | undefined> {
  const isRepo = async (candidate: string): Promise<boolean> => {
    const snapshots = await stat(join(candidate, 'snapshots')).catch(() => undefined);
    if (!snapshots?.isDirectory()) return false;
    const others = await Promise.all(['refs', 'blobs'].map((name) => stat(join(candidate, name)).catch(() => undefined)));
    return others.some((other) => other?.isDirectory());
  };
  if (await isRepo(dir)) return { repo: dir, part: 'a Hugging Face hub repository' };
  if (basename(dir) === 'refs' && (await isRepo(dirname(dir)))) return { repo: dirname(dir), part: 'the refs/ of a Hugging Face hub repository' };
  return undefined;
}

/** The revision a ref file holds, or undefined where `file` is not a small file of one revision. */
async function readRevision(file: string): Promise<string | undefined> {
  const handle = await open(file, REF_OPEN_FLAGS).catch(() => undefined);
  if (handle === undefined) return undefined;
  try {
    const info = await handle.stat();
    if (!info.isFile() || info.size > MAX_REF_FILE_BYTES) return undefined;
    // One read, bounded: a file that grew since its stat is cut, and then no revision.
    const bytes = Buffer.alloc(MAX_REF_FILE_BYTES + 1);
    const { bytesRead } = await handle.read(bytes, 0, bytes.length, 0);
    const text = bytes.subarray(0, bytesRead).toString('latin1').trim();
    return REVISION.test(text) ? text : undefined;
  } catch {
    return undefined;
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/** `snapshots/<rev> (<absolute>)` where it exists, else why not. */
async function describeSnapshot(repo: string, revision: string): Promise<string> {
  const snapshot = join(repo, 'snapshots', revision);
  const info = await stat(snapshot).catch(() => undefined);
  return info?.isDirectory() ? `open (or build) ${snapshot}` : `but ${snapshot} does not exist (not downloaded yet)`;
}

/**
 * For NOT_SAFETENSORS of a directory: where it is a hub repository (or its refs/), that the model
 * is in snapshots/<rev>, and the snapshot refs/main names. '' otherwise.
 */
export async function describeHubDirectory(dir: string): Promise<string> {
  const found = await findHubRepo(dir);
  if (found === undefined) return '';
  const revision = await readRevision(join(found.repo, 'refs', 'main'));
  const main = revision === undefined ? '' : `; refs/main names snapshots/${revision}: ${await describeSnapshot(found.repo, revision)}`;
  return `; it is ${found.part}: its model files are in snapshots/<rev> (one directory per revision)${main}`;
}

/**
 * For a file that did not read as safetensors: where it is a hub ref (a small file of one revision,
 * as refs/main is), the snapshot it names. Undefined otherwise.
 */
export async function describeHubRef(file: string): Promise<string | undefined> {
  const revision = await readRevision(file);
  if (revision === undefined) return undefined;
  const repo = basename(dirname(file)) === 'refs' ? dirname(dirname(file)) : undefined;
  const where = repo === undefined ? `the model is the snapshots/${revision} directory of its repository` : await describeSnapshot(repo, revision);
  return `it is not a model file but a Hugging Face hub ref naming revision ${revision}: ${where}`;
}
