// Exponent analysis of a model without writing anything: what the build would do, and why.
import { checkKnownOptions, optionNamesOf } from './check-known-options.js';
import { calibrateFromHistogram, computePayloadLayout, countExponents } from '@splitzip/codec';
import { readTensorBytes } from '@splitzip/safetensors';
import { describeModelObjectChanged, openBuilderModel } from './open-builder-model.js';
import { isCacheableSize } from './limits.js';
import { canPayloadShrink } from './check-payload-gain.js';
import { viewBf16 } from './tensor-tasks.js';
import { throwIfInterrupted } from './throw-if-interrupted.js';

export interface TensorStats {
  name: string;
  dtype: string;
  shape: number[];
  shard: string;
  sizeBytes: number;
  /** BF16 tensors only from here on (null otherwise). */
  elementCount: number | null;
  distinctExponents: number | null;
  /** Share of values whose exponent is in the Top-16. */
  coverage: number | null;
  /** Shannon entropy of the exponent distribution, bits per value. */
  entropyBits: number | null;
  escapeCount: number | null;
  /** The payload size the codec would produce (computePayloadLayout). */
  predictedBytes: number | null;
  predictedRatio: number | null;
  /** Its predicted payload is smaller than its raw bytes (BF16 tensors analysed only, null otherwise). */
  shrinks: boolean | null;
  /**
   * Would the build encode it: BF16, size within limits, coverage at or above the gate, and, with
   * `skipNoGain` (build --skip-no-gain), its predicted payload smaller than its raw bytes?
   */
  encodable: boolean;
  /**
   * What the build reports for it: 'encode' (or cached), else its skip, in the build's order: dtype,
   * size, then (skipNoGain) no gain where no payload of it can shrink, coverage, no gain from its escapes.
   */
  verdict: 'encode' | 'skip_dtype' | 'skip_size' | 'skip_coverage' | 'skip_no_gain';
}

export interface ModelStatsReport {
  model: string;
  coverageMin: number;
  chunkSize: number;
  /** The build predicted is one with --skip-no-gain. */
  skipNoGain: boolean;
  tensors: TensorStats[];
  totals: {
    tensors: number;
    /** BF16 tensors analysed: those within MAX_CACHED_TENSOR_BYTES. */
    bf16Tensors: number;
    /** BF16 tensors above MAX_CACHED_TENSOR_BYTES: not read, and the build skips them (skipped_size). */
    tooLargeTensors: number;
    /**
     * BF16 tensors whose payload would not be smaller than their raw bytes, counted as a build with
     * --skip-no-gain counts skipped_no_gain (its order: one under 1,409 values whatever its coverage,
     * else one that passes the gate); without skipNoGain the build encodes those that pass the gate.
     */
    noGainTensors: number;
    /** BF16 tensors the build skips for coverage (its skipped_coverage, in its order). */
    coverageSkippedTensors: number;
    encodableTensors: number;
    rawBytes: number;
    bf16Bytes: number;
    /** Raw bytes of the tensors the build would encode, and their predicted payload bytes. */
    encodableBytes: number;
    predictedBytes: number;
    predictedRatio: number | null;
    /** Entropy of the exponents of all BF16 values together, bits per value. */
    entropyBits: number | null;
    /**
     * Bytes an ideal entropy coder of each tensor's exponents would need (sign+mantissa byte + H
     * bits per value), over the tensors the build would encode: the same ones as `predictedBytes`.
     */
    entropyBoundBytes: number;
    escapeCount: number;
    elementCount: number;
  };
}

export interface AnalyzeModelOptions {
  coverageMin: number;
  chunkSize: number;
  /** Predict a build with --skip-no-gain (BuildCacheOptions.skipNoGain); off by default, as the build. */
  skipNoGain?: boolean | undefined;
  signal?: AbortSignal | undefined;
  onProgress?: ((event: { doneBytes: number; totalBytes: number; tensor: string }) => void) | undefined;
}

const ANALYZE_MODEL_OPTIONS = optionNamesOf<AnalyzeModelOptions>({ coverageMin: true, chunkSize: true, skipNoGain: true, signal: true, onProgress: true });

/**
 * The build's verdict on an analysed BF16 tensor, in its order (build-cache.ts): with skipNoGain one
 * of which no payload can shrink is skipped unread before its coverage is known, then the gate, then
 * a payload its escapes keep from shrinking. verify --model and the runtime give reasons in this order.
 */
function judgeBf16Tensor(sizeBytes: number, coverage: number, shrinks: boolean, options: AnalyzeModelOptions): TensorStats['verdict'] {
  if (options.skipNoGain === true && !canPayloadShrink(sizeBytes, options.chunkSize)) return 'skip_no_gain';
  if (coverage < options.coverageMin) return 'skip_coverage';
  if (options.skipNoGain === true && !shrinks) return 'skip_no_gain';
  return 'encode';
}

export async function analyzeModel(modelPath: string, options: AnalyzeModelOptions): Promise<ModelStatsReport> {
  checkKnownOptions(options, ANALYZE_MODEL_OPTIONS, 'analyzeModel');
  const { model } = await openBuilderModel(modelPath, { verb: 'stats', ...(options.signal ? { signal: options.signal } : {}) });
  try {
    const isAnalysed = (dtype: string, sizeBytes: number): boolean => dtype === 'BF16' && isCacheableSize(sizeBytes);
    let largest = 0;
    let totalBytes = 0;
    for (const t of model.tensors) {
      if (!isAnalysed(t.dtype, t.slice.sizeBytes)) continue;
      largest = Math.max(largest, t.slice.sizeBytes);
      totalBytes += t.slice.sizeBytes;
    }
    // One read buffer for the whole model: memory is the largest tensor, whatever the model size.
    const buffer = new Uint8Array(largest);
    const pooled = createExponentTotals();
    const tensors: TensorStats[] = [];
    let doneBytes = 0;
    for (const tensor of model.tensors) {
      throwIfInterrupted(options.signal);
      const base = { name: tensor.name, dtype: tensor.dtype, shape: [...tensor.shape], shard: tensor.slice.shardName, sizeBytes: tensor.slice.sizeBytes };
      if (!isAnalysed(tensor.dtype, tensor.slice.sizeBytes)) {
        const verdict = tensor.dtype !== 'BF16' ? 'skip_dtype' : 'skip_size';
        tensors.push({ ...base, elementCount: null, distinctExponents: null, coverage: null, entropyBits: null, escapeCount: null, predictedBytes: null, predictedRatio: null, shrinks: null, encodable: false, verdict });
        continue;
      }
      const bytes = await readTensorBytes(model, tensor, buffer.subarray(0, tensor.slice.sizeBytes)).catch((error: unknown) => {
        throw describeModelObjectChanged(error, { file: tensor.shardPath, tensor: tensor.name, verb: 'stats' }) ?? error;
      });
      const { histogram, ...analysis } = analyzeBf16Bytes(bytes, options.chunkSize);
      addExponentCounts(pooled, histogram);
      const shrinks = analysis.predictedBytes < tensor.slice.sizeBytes;
      const verdict = judgeBf16Tensor(tensor.slice.sizeBytes, analysis.coverage, shrinks, options);
      tensors.push({
        ...base,
        ...analysis,
        predictedRatio: analysis.elementCount > 0 ? analysis.predictedBytes / tensor.slice.sizeBytes : null,
        shrinks,
        encodable: verdict === 'encode',
        verdict,
      });
      doneBytes += tensor.slice.sizeBytes;
      options.onProgress?.({ doneBytes, totalBytes, tensor: tensor.name });
    }

    const bf16 = tensors.filter((t) => t.elementCount !== null);
    const encodable = tensors.filter((t) => t.encodable);
    const sum = (list: TensorStats[], pick: (t: TensorStats) => number): number => list.reduce((total, t) => total + pick(t), 0);
    const encodableBytes = sum(encodable, (t) => t.sizeBytes);
    const predictedBytes = sum(encodable, (t) => t.predictedBytes ?? 0);
    const elementCount = sum(bf16, (t) => t.elementCount ?? 0);
    const pooledEntropy = elementCount > 0 ? entropyOf(pooled) : null;
    return {
      model: modelPath,
      coverageMin: options.coverageMin,
      chunkSize: options.chunkSize,
      skipNoGain: options.skipNoGain === true,
      tensors,
      totals: {
        tensors: tensors.length,
        bf16Tensors: bf16.length,
        tooLargeTensors: tensors.filter((t) => t.dtype === 'BF16' && t.elementCount === null).length,
        // Those an opted-in build skips for no gain: one order (judgeBf16Tensor's), whatever this report predicts.
        noGainTensors: bf16.filter((t) => judgeBf16Tensor(t.sizeBytes, t.coverage!, t.shrinks!, { ...options, skipNoGain: true }) === 'skip_no_gain').length,
        coverageSkippedTensors: tensors.filter((t) => t.verdict === 'skip_coverage').length,
        encodableTensors: encodable.length,
        rawBytes: sum(tensors, (t) => t.sizeBytes),
        bf16Bytes: sum(bf16, (t) => t.sizeBytes),
        encodableBytes,
        predictedBytes,
        predictedRatio: encodableBytes > 0 ? predictedBytes / encodableBytes : null,
        entropyBits: pooledEntropy,
        // Over the tensors `predictedBytes` covers: summed over every BF16 tensor, skipped ones
        // included, the bound came out above the prediction it is there to be compared with.
        entropyBoundBytes: Math.ceil(sum(encodable, (t) => ((t.elementCount ?? 0) * (8 + (t.entropyBits ?? 0))) / 8)),
        escapeCount: sum(bf16, (t) => t.escapeCount ?? 0),
        elementCount,
      },
    };
  } finally {
    await model.close();
  }
}

/** The exponent analysis of one BF16 tensor's raw bytes (what `stats` prints per tensor). */
export interface Bf16BytesAnalysis {
  /** Values per exponent (the codec's histogram). */
  histogram: Uint32Array;
  elementCount: number;
  distinctExponents: number;
  coverage: number;
  entropyBits: number;
  escapeCount: number;
  predictedBytes: number;
}

export function analyzeBf16Bytes(bytes: Uint8Array, chunkSize: number): Bf16BytesAnalysis {
  const values = viewBf16(bytes);
  const histogram = countExponents(values);
  const { coverage, escapeCount } = calibrateFromHistogram(histogram);
  return {
    histogram,
    elementCount: values.length,
    distinctExponents: histogram.reduce((n, c) => n + (c > 0 ? 1 : 0), 0),
    coverage,
    entropyBits: entropyOf(histogram),
    escapeCount,
    predictedBytes: computePayloadLayout(values.length, escapeCount, chunkSize).totalBytes,
  };
}

/**
 * Per-exponent value counts summed over a model's tensors. Doubles, not a Uint32Array: one tensor's
 * counts fit 32 bits (at most MAX_ELEMENT_COUNT values), a model's do not (a 70B-parameter model
 * holds over 2^32 values of its commonest exponents), and a Uint32Array wrapped them silently,
 * which skewed the pooled entropy `stats` prints. Exact up to 2^53 values.
 */
export function createExponentTotals(): Float64Array {
  return new Float64Array(256);
}

export function addExponentCounts(totals: Float64Array, histogram: ArrayLike<number>): void {
  for (let e = 0; e < 256; e++) totals[e]! += histogram[e] ?? 0;
}

/** Shannon entropy in bits per value of a histogram (0 for an empty one). */
export function entropyOf(histogram: ArrayLike<number>): number {
  let total = 0;
  for (let i = 0; i < histogram.length; i++) total += histogram[i]!;
  if (total === 0) return 0;
  let bits = 0;
  for (let i = 0; i < histogram.length; i++) {
    const c = histogram[i]!;
    if (c > 0) bits -= (c / total) * Math.log2(c / total);
  }
  return bits;
}
