// The CLI run in this process (runCli of src) with stdout and stderr collected in memory: what the
// tests that need no child process share (helpers/run-cli.ts runs the built binary instead).
import { Writable } from 'node:stream';
import { runCli } from '../../src/run-cli.js';

export interface MemoryIo {
  io: { stdout: Writable & { isTTY?: boolean }; stderr: Writable & { isTTY?: boolean } };
  out(): string;
  err(): string;
}

/** Two writable sinks whose text is read back with out() and err(). */
export function memoryIo(): MemoryIo {
  const chunks = { out: [] as string[], err: [] as string[] };
  const sink = (into: string[]): Writable =>
    new Writable({
      write(chunk, _encoding, done) {
        into.push(String(chunk));
        done();
      },
    });
  return { io: { stdout: sink(chunks.out), stderr: sink(chunks.err) }, out: () => chunks.out.join(''), err: () => chunks.err.join('') };
}

/** runCli(argv) in this process: its exit code and what it printed. */
export async function runInProcess(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const { io, out, err } = memoryIo();
  const code = await runCli(argv, { io });
  return { code, out: out(), err: err() };
}
