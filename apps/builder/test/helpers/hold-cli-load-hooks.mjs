// Module hooks (off the main thread): the module whose source defines runCli is held until
// `<holdDir>/release` exists; `<holdDir>/held` says that it is being held.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

let holdDir;
let held = false;

export function initialize(data) {
  holdDir = data?.holdDir;
}

export async function load(url, context, nextLoad) {
  const result = await nextLoad(url, context);
  if (holdDir === undefined || held || !url.includes('/dist/')) return result;
  const source = String(result.source ?? '');
  if (!source.includes('async function runCli(')) return result;
  held = true;
  writeFileSync(join(holdDir, 'held'), url);
  while (!existsSync(join(holdDir, 'release'))) await sleep(10);
  return result;
}
