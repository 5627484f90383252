// V8 flags the `splitzip` CLI sets at start-up (cli.ts), before any other code runs: the process's
// heap is the builder's to shape, a library's is its caller's.

/**
 * How far V8 lets the old generation grow past what survived its last full GC before the next one:
 * a factor of 1 + this / 100 (V8's own is up to 4 while GC is cheap). An s3:// model's reads are one
 * GET per tensor, and the AWS SDK allocates ~270 KB of short-lived heap per request (middleware
 * stack, endpoint rules, signing; measured with V8's sampling heap profiler: 97 % of the build's S3
 * allocations, the store's own 3 %), whatever the range's size. Requests in flight across minor GCs
 * promote it, and V8 let the old space fill with it: 200 tensors of 200 KB from s3:// peaked at
 * 159-164 MiB RSS, 600 at 178 MiB, against a bound of 143.6 MiB (3 x the largest tensor + 150 MB)
 * and 139 MiB for the same models read from local files; the live heap after each full GC stayed at
 * ~20 MB (no leak). With 20 the same builds peak at ~136-139 MiB, in the same time (26.2 s against
 * 26.1 s for 600 tensors). --optimize-for-size went lower (114-117 MiB) but 20-30 % slower.
 */
export const HEAP_GROWING_PERCENT = 20;

/** The flags, in the order cli.ts sets them (setFlagsFromString). */
export const CLI_V8_FLAGS: readonly string[] = ['--expose-gc', `--heap-growing-percent=${HEAP_GROWING_PERCENT}`];
