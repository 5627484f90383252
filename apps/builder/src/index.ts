// @splitzip/builder as a library: the build, the model check, the analysis and the CLI itself.
export {
  buildCache,
  defaultJobs,
  DEFAULT_COVERAGE_MIN,
  MIN_IN_FLIGHT_BYTES,
  inFlightBytesOf,
  GC_EVERY_MIN_BYTES,
  SLAB_LARGEST_FACTOR,
  WORKER_RSS_BYTES,
  PROCESS_RSS_BYTES,
  RSS_BOUND_BASE_BYTES,
  RSS_BOUND_LARGEST_FACTOR,
  RSS_HEADROOM_BYTES,
  MAX_TENSORS_IN_FLIGHT,
  MAX_ALIASES_IN_FLIGHT,
  type BuildCacheOptions,
  type BuildReport,
  type BuildCommitted,
  type BuildTensorReport,
  type BuildTensorStatus,
  type BuildProgressEvent,
} from './build-cache.js';
export { planBuildMemory, countStartupWorkers, computeRssBoundBytes, resolveBuildJobs, INLINE_MAX_BUILD_BYTES, type BuildMemoryInput, type BuildMemoryPlan } from './plan-build-memory.js';
export { verifyModelCache, type ModelCheckReport, type ModelTensorCheck, type ModelTensorStatus, type VerifyModelCacheOptions } from './verify-model-cache.js';
export { inspectCache, type InspectEntry, type InspectReport } from './inspect-cache.js';
export { analyzeModel, entropyOf, type ModelStatsReport, type TensorStats, type AnalyzeModelOptions } from './analyze-model.js';
export { ENCODE_BACKENDS, type EncodeBackend } from './encode-backends.js';
export { BuilderError, UsageError, isBuilderError, type BuilderErrorCode, type BuilderErrorContext } from './errors.js';
export { describeError } from './describe-error.js';
export { createProgressBar, type ProgressBar, type ProgressBarOptions } from './progress-bar.js';
export { runCli, COMMANDS, VERSION, EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED, type RunCliOptions } from './run-cli.js';
export { defineCommand, type CommandDef, type ArgsSpec, type CommandIo } from './define-command.js';
export { parseCommandArgs } from './parse-command-args.js';
export { renderCommandHelp, renderMainHelp } from './render-command-help.js';
