// Compiled by explicit-undefined-options.test.ts with exactOptionalPropertyTypes: every optional
// property of every exported *Options type accepts an explicit `undefined` (a server forwarding its
// own optional settings writes `{ signal: settings.signal }`, not a conditional spread).
import type { CodecArenaOptions, DecodeOptions, DecodeSegmentsOptions, EncodeOptions } from '@splitzip/codec';
import type { CreateKernelsOptions, DecodeOptions as KernelsDecodeOptions, EncodeOptions as KernelsEncodeOptions } from '@splitzip/kernels';
import type { WorkerDecoderOptions } from '@splitzip/kernels/node';
import type { IterateTensorsOptions, OpenFromSourceOptions, SafetensorsWriterOptions, ShardedModelOptions } from '@splitzip/safetensors';
import type { AliasSlicesOptions, GcOptions, OpenCacheStoreOptions, ReadBlobOptions, S3StoreOptions, VerifyOptions } from '@splitzip/store';
import type {
  DecodeCallOptions,
  LoadModelOptions,
  LoadTensorOptions,
  LoadTensorToDeviceOptions,
  OpenModelOptions,
  OpenShardCacheOptions,
  OrderedPipelineOptions,
  PacedReaderOptions,
  StagingPoolOptions,
  ThreadDecoderOptions,
} from '@splitzip/runtime';
import type { AnalyzeModelOptions, BuildCacheOptions, VerifyModelCacheOptions } from '@splitzip/builder';

type OptionalKeys<T> = { [K in keyof T]-?: object extends Pick<T, K> ? K : never }[keyof T];
/** Every optional property set to `undefined`. */
type AllUndefined<T> = { [K in OptionalKeys<T>]-?: undefined };
type Accepts<T> = AllUndefined<T> extends Pick<T, OptionalKeys<T>> ? true : false;

export const checks: [
  Accepts<CodecArenaOptions>,
  Accepts<DecodeOptions>,
  Accepts<DecodeSegmentsOptions>,
  Accepts<EncodeOptions>,
  Accepts<CreateKernelsOptions>,
  Accepts<KernelsDecodeOptions>,
  Accepts<KernelsEncodeOptions>,
  Accepts<WorkerDecoderOptions>,
  Accepts<IterateTensorsOptions>,
  Accepts<OpenFromSourceOptions>,
  Accepts<SafetensorsWriterOptions>,
  Accepts<ShardedModelOptions>,
  Accepts<AliasSlicesOptions>,
  Accepts<GcOptions>,
  Accepts<OpenCacheStoreOptions>,
  Accepts<ReadBlobOptions>,
  Accepts<S3StoreOptions>,
  Accepts<VerifyOptions>,
  Accepts<DecodeCallOptions>,
  Accepts<LoadModelOptions>,
  Accepts<LoadTensorOptions>,
  Accepts<LoadTensorToDeviceOptions>,
  Accepts<OpenModelOptions>,
  Accepts<OpenShardCacheOptions>,
  Accepts<OrderedPipelineOptions<unknown, unknown>>,
  Accepts<PacedReaderOptions>,
  Accepts<StagingPoolOptions>,
  Accepts<ThreadDecoderOptions>,
  Accepts<AnalyzeModelOptions>,
  Accepts<BuildCacheOptions>,
  Accepts<VerifyModelCacheOptions>,
] = [true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true];
