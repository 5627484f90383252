// The options of one call (a Kernels instance's decode, decodeToDevice and encode; the worker
// decoder's decode), checked before it runs: a stray argument, a misspelt key (`verfy`) or
// `verify: 'false'` verified when the caller meant not to.
import { checkBooleanOption, checkOptionKeys, checkOptionsObject, optionNames } from './check-options.js';
import type { DecodeOptions, EncodeOptions } from './types.js';

const DECODE_OPTIONS = optionNames<DecodeOptions>({ verify: true });
const ENCODE_OPTIONS = optionNames<EncodeOptions>({ chunkSize: true });

/** decode's and decodeToDevice's options (the Kernels instance's and the worker decoder's). */
export function checkDecodeOptions(options: unknown, call: string): DecodeOptions | undefined {
  if (options === undefined) return undefined;
  checkOptionsObject(options, 'options', call);
  checkOptionKeys(options, DECODE_OPTIONS, call);
  // Read once: the options as checked go on, so a getter is never read again by a backend.
  const verify = (options as DecodeOptions).verify;
  checkBooleanOption(verify, 'verify');
  return verify === undefined ? {} : { verify };
}

/** encode's options; chunkSize's value is the codec's to judge (SplitZipError, as the codec's encode). */
export function checkEncodeOptions(options: unknown, call: string): void {
  if (options === undefined) return;
  checkOptionsObject(options, 'options', call);
  checkOptionKeys(options, ENCODE_OPTIONS, call);
}
