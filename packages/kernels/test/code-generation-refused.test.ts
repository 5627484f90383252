// gpu.js's cpu backend compiles its kernels with `new Function`. Where code generation from strings
// is refused (a page's Content Security Policy without 'unsafe-eval'; Node's
// --disallow-code-generation-from-strings stands in for it here), the backend falls back to the
// codec with a reason that names the cause: gpu.js itself only says '"run" not defined on CPUKernel'.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const NODE_DIST = new URL('../dist/node.js', import.meta.url).href;

const SCRIPT = `
const { createKernels } = await import(${JSON.stringify(NODE_DIST)});
const { calibrateCodebook, encode } = await import('@splitzip/codec');
const values = Uint16Array.from({ length: 5003 }, (_, i) => (0x3f80 + (i % 37)) ^ (i & 0x8000));
const kernels = await createKernels({ backend: 'cpu' });
const result = await kernels.decode(encode(values, calibrateCodebook(values).codebook));
const exact = result.values.length === values.length && result.values.every((v, i) => v === values[i]);
console.log(JSON.stringify({ backend: kernels.backend, reason: kernels.fallbackReason, decodedBy: result.backend, exact }));
await kernels.dispose();
`;

async function runWith(flags: string[]): Promise<{ backend: string; reason: string | null; decodedBy: string; exact: boolean }> {
  const { stdout } = await promisify(execFile)(process.execPath, [...flags, '--input-type=module', '-e', SCRIPT], { cwd: fileURLToPath(new URL('..', import.meta.url)) });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as never;
}

describe("the cpu backend where code generation from strings is refused", () => {
  it('falls back to the codec, bit-exact, with a reason naming the refusal', async () => {
    const refused = await runWith(['--disallow-code-generation-from-strings']);
    expect(refused).toMatchObject({ backend: 'codec', decodedBy: 'codec', exact: true });
    expect(refused.reason).toMatch(/^cpu failed to start: code generation from strings is refused here .*'unsafe-eval'.*\(gpu\.js said: /);
  }, 60_000);

  it('starts as usual where it is allowed (the control)', async () => {
    expect(await runWith([])).toMatchObject({ backend: 'cpu', reason: null, decodedBy: 'cpu', exact: true });
  }, 60_000);
});
