export { CONVERTER_VERSION, DEFAULT_MODEL_SOURCE_PACKAGE, defaultModelDir, defaultModelSource, ensureDefaultModel, type DefaultModelStamp, type EnsureDefaultModelOptions } from './ensure-default-model.js';
export { convertFloat32BytesToBf16, float32BitsToBf16Bits } from './convert-float32-to-bf16.js';
export { DEFAULT_MODEL_SHARD_BYTES, convertTfjsToSafetensors, toSafetensorsTensors, type ConvertTfjsOptions } from './convert-tfjs-to-safetensors.js';
export { DefaultModelError, type DefaultModelErrorCode } from './errors.js';
export {
  SYNTHETIC_GENERATOR_VERSION,
  generateSyntheticModel,
  inverseNormalCdf,
  planSyntheticModel,
  type SyntheticModelOptions,
  type SyntheticModelResult,
  type SyntheticTensorInfo,
  type SyntheticTensorKind,
} from './generate-synthetic-model.js';
export { halfToFloat32Bits, readTfjsWeights, type TfjsWeight } from './read-tfjs-weights.js';
