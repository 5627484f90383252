import type { Codebook } from '@splitzip/codec';
import type {
  BackendName,
  DecodeOptions,
  DecodeResult,
  DeviceDecodeResult,
  EncodeOptions,
  EncodeResult,
} from './types.js';

/** One started backend, as create-kernels.ts drives it; results carry no fallback report yet. */
export interface BackendImpl {
  readonly name: BackendName;
  decode(payload: Uint8Array, out: Uint16Array | undefined, options: DecodeOptions | undefined): Promise<DecodeResult>;
  encode(values: Uint16Array, codebook: Codebook, options: EncodeOptions | undefined): Promise<EncodeResult>;
  decodeToDevice(payload: Uint8Array, options: DecodeOptions | undefined): Promise<DeviceDecodeResult>;
  dispose(): Promise<void>;
}
