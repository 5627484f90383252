/**
 * A Top-16 coverage fraction (calibrateCodebook's `coverage`) to `digits` decimals for a message,
 * rounded down: a value under a gate never prints as the gate (0.98999977 printed as `0.990000 <
 * 0.99`). Exact: the printed decimal, read back, is at most `value`. Shared by the builder and the
 * runtime, whose reasons name the same coverage alike.
 */
export function formatCoverage(value: number, digits: number): string {
  const scale = 10 ** digits;
  let units = Math.floor(value * scale);
  // value * scale is rounded: step to the largest decimal of this many digits not above `value`.
  if (units / scale > value) units -= 1;
  else if ((units + 1) / scale <= value) units += 1;
  return (units / scale).toFixed(digits);
}
