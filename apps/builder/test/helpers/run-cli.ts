// Runs the built binary as a user would: `node dist/cli.js ...` in a child process.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const CLI_PATH = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export function assertBuilt(): void {
  if (!existsSync(CLI_PATH)) throw new Error(`${CLI_PATH} is missing: run \`pnpm --filter @splitzip/builder build\` first`);
}

export function startCli(args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): ChildProcess {
  return spawn(process.execPath, [CLI_PATH, ...args], {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

export function runCli(args: readonly string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<CliResult> {
  const child = startCli(args, options);
  return collect(child, options.timeoutMs ?? 120_000);
}

export function collect(child: ChildProcess, timeoutMs: number): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`splitzip timed out after ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Runs with --json and parses stdout; fails with both streams shown when it is not JSON. */
export async function runJson<T = Record<string, unknown>>(args: readonly string[], expectCode = 0): Promise<{ result: CliResult; json: T }> {
  const result = await runCli([...args, '--json']);
  if (result.code !== expectCode) {
    throw new Error(`expected exit ${expectCode}, got ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);
  }
  try {
    return { result, json: JSON.parse(result.stdout) as T };
  } catch {
    throw new Error(`stdout is not JSON:\n${result.stdout}\nstderr: ${result.stderr}`);
  }
}
