import { readFile, stat } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';
import { DefaultModelError } from './errors.js';

/** A tfjs weight decoded to its stored dtype, as little-endian bytes. */
export interface TfjsWeight {
  name: string;
  /** Decoded dtype: quantized float weights come out as float32. */
  dtype: 'float32' | 'int32' | 'bool';
  shape: number[];
  /** Little-endian bytes of `dtype` (float32 bit patterns kept as stored, NaN payloads included). */
  bytes: Uint8Array;
}

/** Largest model.json accepted (the real one is 247 KB; topology only). */
const MAX_MODEL_JSON_BYTES = 64 << 20;
/** Largest sum of weight shards accepted (the real model has 28 MB). */
const MAX_WEIGHT_BYTES = 1 << 30;

interface ManifestWeight {
  name: string;
  shape: number[];
  dtype: string;
  quantization?: { dtype?: string; scale?: number; min?: number; original_dtype?: string };
}

/**
 * Reads a tfjs layers/graph model's weights: model.json's weightsManifest groups, each group's shard
 * files concatenated in order, weights laid out back to back in manifest order. Quantized weights
 * (uint8/uint16 affine with scale+min, float16) are dequantized the way tfjs does it; string and
 * complex weights are rejected. Every size is checked against the shards before use.
 */
export async function readTfjsWeights(modelJsonPath: string): Promise<TfjsWeight[]> {
  const file = resolve(modelJsonPath);
  const info = await stat(file).catch((cause: unknown) => {
    throw new DefaultModelError('SOURCE_NOT_FOUND', 'model.json not found', { file, cause });
  });
  if (info.size > MAX_MODEL_JSON_BYTES) throw new DefaultModelError('TFJS_INVALID_MANIFEST', `model.json has ${info.size} bytes, over ${MAX_MODEL_JSON_BYTES}`, { file });
  let manifest: unknown;
  try {
    manifest = (JSON.parse(await readFile(file, 'utf8')) as { weightsManifest?: unknown }).weightsManifest;
  } catch (cause) {
    throw new DefaultModelError('TFJS_INVALID_MANIFEST', 'model.json is not JSON', { file, cause });
  }
  if (!Array.isArray(manifest)) throw new DefaultModelError('TFJS_INVALID_MANIFEST', 'model.json has no weightsManifest array', { file });
  const out: TfjsWeight[] = [];
  let totalBytes = 0;
  for (const group of manifest as unknown[]) {
    const { paths, weights } = (group ?? {}) as { paths?: unknown; weights?: unknown };
    if (!Array.isArray(paths) || !paths.every((p) => typeof p === 'string') || !Array.isArray(weights)) {
      throw new DefaultModelError('TFJS_INVALID_MANIFEST', 'a weightsManifest group lacks paths or weights', { file });
    }
    const buffers: Uint8Array[] = [];
    for (const path of paths as string[]) {
      if (isAbsolute(path) || path.split(/[\\/]/).includes('..')) {
        throw new DefaultModelError('TFJS_INVALID_MANIFEST', `weight path ${JSON.stringify(path)} leaves the model directory`, { file });
      }
      const shardPath = resolve(dirname(file), path);
      const size = (await stat(shardPath).catch((cause: unknown) => {
        throw new DefaultModelError('SOURCE_NOT_FOUND', `weight shard ${path} not found`, { file, cause });
      })).size;
      totalBytes += size;
      if (totalBytes > MAX_WEIGHT_BYTES) throw new DefaultModelError('TFJS_SIZE_MISMATCH', `weight shards exceed ${MAX_WEIGHT_BYTES} bytes`, { file });
      buffers.push(new Uint8Array(await readFile(shardPath)));
    }
    const data = concat(buffers);
    let offset = 0;
    for (const raw of weights as unknown[]) {
      const weight = checkWeight(raw, file);
      const count = weight.shape.reduce((n, d) => n * d, 1);
      const { storedBytesPerElement, decode } = decoderFor(weight, file);
      const size = count * storedBytesPerElement;
      if (!Number.isSafeInteger(size) || offset + size > data.length) {
        throw new DefaultModelError('TFJS_SIZE_MISMATCH', `needs bytes [${offset}, ${offset + size}) but the group has ${data.length}`, { file, tensor: weight.name });
      }
      const stored = data.subarray(offset, offset + size);
      offset += size;
      out.push({ name: weight.name, shape: weight.shape, ...decode(stored, count) });
    }
    if (offset !== data.length) {
      throw new DefaultModelError('TFJS_SIZE_MISMATCH', `weights use ${offset} bytes of a ${data.length}-byte group`, { file });
    }
  }
  return out;
}

function checkWeight(raw: unknown, file: string): ManifestWeight {
  const w = (raw ?? {}) as Partial<ManifestWeight>;
  if (typeof w.name !== 'string' || typeof w.dtype !== 'string' || !Array.isArray(w.shape) || !w.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw new DefaultModelError('TFJS_INVALID_MANIFEST', 'weight entry needs a name, a dtype and a shape of non-negative integers', { file, tensor: String(w.name) });
  }
  return w as ManifestWeight;
}

type Decoded = { dtype: TfjsWeight['dtype']; bytes: Uint8Array };

function decoderFor(weight: ManifestWeight, file: string): { storedBytesPerElement: number; decode: (stored: Uint8Array, count: number) => Decoded } {
  const q = weight.quantization;
  const dtype = weight.dtype;
  if (dtype !== 'float32' && dtype !== 'int32' && dtype !== 'bool') {
    throw new DefaultModelError('TFJS_UNSUPPORTED_DTYPE', `dtype ${dtype} is not supported (float32, int32, bool only)`, { file, tensor: weight.name });
  }
  if (!q) {
    const width = dtype === 'bool' ? 1 : 4;
    return { storedBytesPerElement: width, decode: (stored) => ({ dtype, bytes: stored.slice() }) };
  }
  const original = q.original_dtype ?? dtype;
  if (q.dtype === 'float16') {
    if (original !== 'float32') throw unsupported(weight, file, `float16 quantization of ${original}`);
    return {
      storedBytesPerElement: 2,
      decode: (stored, count) => {
        const out = new Uint32Array(count);
        for (let i = 0; i < count; i++) out[i] = halfToFloat32Bits((stored[2 * i] as number) | ((stored[2 * i + 1] as number) << 8));
        return { dtype: 'float32', bytes: new Uint8Array(out.buffer) };
      },
    };
  }
  if (q.dtype === 'uint8' || q.dtype === 'uint16') {
    const { scale, min } = q;
    if (typeof scale !== 'number' || typeof min !== 'number' || !Number.isFinite(scale) || !Number.isFinite(min)) throw unsupported(weight, file, `${q.dtype} quantization without finite scale and min`);
    if (original !== 'float32' && original !== 'int32') throw unsupported(weight, file, `${q.dtype} quantization of ${original}`);
    const width = q.dtype === 'uint8' ? 1 : 2;
    return {
      storedBytesPerElement: width,
      decode: (stored, count) => {
        // As tfjs: value = q * scale + min, computed in double, stored as float32 (int32: rounded).
        const values = original === 'float32' ? new Float32Array(count) : new Int32Array(count);
        for (let i = 0; i < count; i++) {
          const v = width === 1 ? (stored[i] as number) : (stored[2 * i] as number) | ((stored[2 * i + 1] as number) << 8);
          values[i] = original === 'float32' ? v * scale + min : Math.round(v * scale + min);
        }
        return { dtype: original, bytes: new Uint8Array(values.buffer) };
      },
    };
  }
  throw unsupported(weight, file, `quantization dtype ${String(q.dtype)}`);
}

function unsupported(weight: ManifestWeight, file: string, what: string): DefaultModelError {
  return new DefaultModelError('TFJS_UNSUPPORTED_QUANTIZATION', `${what} is not supported`, { file, tensor: weight.name });
}

/** IEEE half -> float32 bits (exact: every half is a float32). */
export function halfToFloat32Bits(h: number): number {
  const sign = (h & 0x8000) << 16;
  const exponent = (h >>> 10) & 0x1f;
  let mantissa = h & 0x3ff;
  if (exponent === 0x1f) return (sign | 0x7f800000 | (mantissa << 13)) >>> 0;
  if (exponent !== 0) return (sign | ((exponent + 112) << 23) | (mantissa << 13)) >>> 0;
  if (mantissa === 0) return sign >>> 0;
  // Subnormal half: normalise.
  let e = 113;
  while ((mantissa & 0x400) === 0) {
    mantissa <<= 1;
    e -= 1;
  }
  return (sign | (e << 23) | ((mantissa & 0x3ff) << 13)) >>> 0;
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0] as Uint8Array;
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
