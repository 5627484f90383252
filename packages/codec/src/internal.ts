// `@splitzip/codec/internal`: the codec's own argument checks and message helpers, for the sibling
// @splitzip packages (kernels, store, runtime, builder) so that they check and word things exactly
// as the codec does. Not the codec's API: no semver promise (README "Internal subpath"). Errors
// thrown here are the main entry's SplitZipError (one class in the ESM build's shared chunk; in the
// CommonJS build a copy that the class's Symbol.for brand makes `instanceof` accept).
export { checkNoOverlap } from './check-overlap.js';
export { argumentTypeError } from './argument-type-error.js';
export { describeValue } from './describe-value.js';
export { findClosestName, MAX_SUGGESTION_EDITS } from './find-closest-name.js';
export { formatCoverage } from './format-coverage.js';
export { findUnknownOption, optionNamesOf, type UnknownOption } from './find-unknown-option.js';
export { isDetachedBuffer } from './is-detached-buffer.js';
export { checkReadableView, isUint16Array, isUint8Array } from './typed-array-kind.js';
export { mallocUsesHugePages } from './malloc-uses-huge-pages.js';
