// The `@splitzip/store/content-key` entry: the content key alone, for threads that hash tensors
// but never open a store (the builder's workers). The package's main entry also loads the store,
// its journal and the S3 client wiring: ~26 MB and ~0.3 CPU-s a thread for nothing. digestHex:
// a blob's SHA-256 on those threads, of any size.
export { computeContentKey, dtypeToTorchText, formatContentKeyPrefix, formatPythonShape, isBf16Dtype } from './compute-content-key.js';
export { digestHex, updateHash } from './hash-bytes.js';
