// Read-only as it happens in the field, for the NOT_WRITABLE tests: a read-only bind mount as root
// (who writes through any mode bits), mode 0444/0555 otherwise.
import { execFileSync } from 'node:child_process';
import { chmod, stat } from 'node:fs/promises';

export const isRoot = process.getuid?.() === 0;

/**
 * Makes the file or directory `path` read-only for this process; resolves the undo, or undefined
 * where it cannot (root without mount: no CAP_SYS_ADMIN).
 */
export async function makeReadOnly(path: string): Promise<(() => Promise<void>) | undefined> {
  if (!isRoot) {
    const mode = (await stat(path)).mode & 0o777;
    await chmod(path, (await stat(path)).isDirectory() ? 0o555 : 0o444);
    return () => chmod(path, mode);
  }
  try {
    execFileSync('mount', ['--bind', path, path], { stdio: 'ignore' });
  } catch {
    return undefined;
  }
  try {
    execFileSync('mount', ['-o', 'remount,bind,ro', path], { stdio: 'ignore' });
  } catch {
    execFileSync('umount', [path]);
    return undefined;
  }
  return async () => {
    execFileSync('umount', [path]);
  };
}
