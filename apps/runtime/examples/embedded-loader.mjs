#!/usr/bin/env node
// An example of embedding @splitzip/runtime the way an inference server does at start-up:
//   1. open the shard cache ONCE (the handle is shared by every later load and request),
//   2. plan one preallocated arena for every weight of the model (one allocation, 64-byte aligned
//      tensors, like a device buffer a server would upload from),
//   3. stream the whole model into it with loadModel (cache hits decoded, the rest read raw),
//   4. keep a name -> typed-array map for the model code, and log where each tensor came from.
//
// Usage: node examples/embedded-loader.mjs <model path> [<cache dir>] [--verify-digest] [--check] [--json]
//   --check: afterwards, compare every tensor with the safetensors bytes (a test hook, not a server step)
// Exits 1 with the typed error's code if loading fails, 3 if --check finds a difference. A cache that
// is there but unusable (a damaged manifest: `splitzip build <model> --out <cache> --repair`) is
// reported on stderr and the model is loaded raw.
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { openSafetensorsModel, readTensorBytes } from '@splitzip/safetensors';
import { loadModel, openShardCache } from '@splitzip/runtime';

/** Tensors start at multiples of this in the arena (a cache line; SIMD loads never straddle). */
const ARENA_ALIGN_BYTES = 64;

const TYPED_ARRAY_OF_DTYPE = {
  BF16: Uint16Array, // raw BF16 bit patterns; the model code widens them as it needs
  F16: Uint16Array,
  F32: Float32Array,
  F64: Float64Array,
  I8: Int8Array,
  U8: Uint8Array,
  BOOL: Uint8Array,
  I16: Int16Array,
  U16: Uint16Array,
  I32: Int32Array,
  U32: Uint32Array,
  I64: BigInt64Array,
  U64: BigUint64Array,
};

/** Where each tensor lives in the arena, in model order. */
export function planArena(model) {
  const offsets = new Map();
  let arenaBytes = 0;
  for (const tensor of model.tensors) {
    arenaBytes = Math.ceil(arenaBytes / ARENA_ALIGN_BYTES) * ARENA_ALIGN_BYTES;
    offsets.set(tensor.name, arenaBytes);
    arenaBytes += tensor.slice.sizeBytes;
  }
  return { offsets, arenaBytes };
}

function viewAs(dtype, data) {
  const Typed = TYPED_ARRAY_OF_DTYPE[dtype];
  if (Typed === undefined || data.byteOffset % Typed.BYTES_PER_ELEMENT !== 0) return data;
  return new Typed(data.buffer, data.byteOffset, data.byteLength / Typed.BYTES_PER_ELEMENT);
}

/**
 * Loads a model into an arena. `cache` is an open ShardCache (or null for raw safetensors only).
 * Returns { weights: Map<name, { dtype, shape, data, source, reason }>, arena, totals, reports }.
 */
export async function loadWeights(model, cache, { verifyDigest = false, concurrency, backend, reader } = {}) {
  const { offsets, arenaBytes } = planArena(model);
  const arena = new Uint8Array(arenaBytes);
  const weights = new Map();
  const load = loadModel(model, cache, {
    verifyDigest,
    concurrency,
    backend,
    reader,
    // Every tensor is written straight into its arena slot: nothing is allocated per tensor.
    allocate: (tensor) => arena.subarray(offsets.get(tensor.name), offsets.get(tensor.name) + tensor.slice.sizeBytes),
    onTensor: (tensor) => {
      weights.set(tensor.name, {
        dtype: tensor.dtype,
        shape: tensor.shape,
        data: viewAs(tensor.dtype, tensor.data),
        source: tensor.source,
        reason: tensor.reason,
      });
    },
  });
  const totals = await load.drain();
  return { weights, arena, totals, reports: load.reports };
}

function formatBytes(bytes) {
  return bytes >= 1e9 ? `${(bytes / 1e9).toFixed(2)} GB` : `${(bytes / 1e6).toFixed(1)} MB`;
}

/**
 * Opens the shard cache, or, when the cache itself is unusable (damaged, of a newer format, an
 * object store that stays unreachable), says so on stderr and goes on without it: the weights are
 * all in the safetensors files, so the server still starts, only slower. Everything else (no cache
 * at that path, a permission, bad credentials, bad arguments) stays an error.
 */
/** Store codes of a cache that is there but cannot be used as it is: `splitzip build --repair` is for them. */
const CACHE_STATE_CODES = new Set(['MANIFEST_INVALID', 'JOURNAL_INVALID', 'UNSUPPORTED_FORMAT', 'SIZE_INVALID']);

async function openCacheOrServeRaw(cacheDir) {
  try {
    return { cache: await openShardCache(cacheDir), cacheError: null };
  } catch (error) {
    // Only what the cache's own state explains (damage, a newer format, an unreachable object store)
    // runs raw; a configuration mistake (no cache at the path, a permission, bad credentials, no
    // descriptor left, an unknown failure) stops the server.
    const unusable = error?.code === 'CACHE_UNAVAILABLE' || (error?.code === 'CACHE_OPEN_FAILED' && CACHE_STATE_CODES.has(error.details?.storeCode));
    if (!unusable) throw error;
    console.error(`embedded-loader: warning: the shard cache cannot be used, loading raw safetensors: ${error.code}: ${error.message}`);
    return { cache: null, cacheError: { code: error.code, storeCode: error.details?.storeCode ?? null, message: error.message } };
  }
}

async function main(argv) {
  const positional = argv.filter((arg) => !arg.startsWith('--'));
  const [modelPath, cacheDir] = positional;
  if (modelPath === undefined) {
    console.error('usage: embedded-loader.mjs <model path> [<cache dir>] [--verify-digest] [--json]');
    return 2;
  }
  const model = await openSafetensorsModel(modelPath);
  const { cache, cacheError } = cacheDir === undefined ? { cache: null, cacheError: null } : await openCacheOrServeRaw(cacheDir);
  try {
    const { weights, arena, totals, reports } = await loadWeights(model, cache, { verifyDigest: argv.includes('--verify-digest') });
    let checked;
    if (argv.includes('--check')) {
      const mismatches = [];
      for (const tensor of model.tensors) {
        const expected = await readTensorBytes(model, tensor);
        const got = weights.get(tensor.name).data;
        const gotBytes = new Uint8Array(got.buffer, got.byteOffset, got.byteLength);
        if (!Buffer.from(gotBytes).equals(Buffer.from(expected))) mismatches.push(tensor.name);
      }
      checked = { tensors: model.tensors.length, mismatches };
    }
    if (argv.includes('--json')) {
      console.log(JSON.stringify({ tensors: weights.size, arenaBytes: arena.byteLength, totals, reports, checked, cacheError }));
      return checked && checked.mismatches.length > 0 ? 3 : 0;
    }
    if (checked) console.log(`  checked ${checked.tensors} tensors against the safetensors bytes: ${checked.mismatches.length} differ`);
    console.log(`loaded ${weights.size} tensors into a ${formatBytes(arena.byteLength)} arena in ${totals.wallMs.toFixed(0)} ms`);
    console.log(
      `  from cache ${totals.fromCache}, raw ${totals.fromRaw} ` +
        `(${Object.entries(totals.byReason)
          .filter(([, count]) => count > 0)
          .map(([reason, count]) => `${reason} ${count}`)
          .join(', ')})`,
    );
    console.log(`  read ${formatBytes(totals.bytesRead)} for ${formatBytes(totals.bytesProduced)} of weights; backend ${totals.backends.join(', ') || 'none'}`);
    for (const report of reports.filter((r) => r.reason === 'cache-failed')) {
      console.log(`  fallback: ${report.name}: ${report.error?.code} ${report.error?.message}`);
    }
    return checked && checked.mismatches.length > 0 ? 3 : 0;
  } finally {
    await cache?.close();
    await model.close();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error) => {
      console.error(`embedded-loader: ${error.code ?? error.name}: ${error.message}`);
      process.exitCode = 1;
    },
  );
}
