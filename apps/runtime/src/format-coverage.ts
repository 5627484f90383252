/**
 * A coverage fraction to `digits` decimals, rounded down: a value under the gate never prints as
 * the gate (0.98999977 made `coverage 0.9900 < gate 0.99`). Exact: the printed decimal, read back,
 * is at most `value`.
 */
export function formatCoverage(value: number, digits: number): string {
  const scale = 10 ** digits;
  let units = Math.floor(value * scale);
  // value * scale is rounded: step to the largest decimal of this many digits not above `value`.
  if (units / scale > value) units -= 1;
  else if ((units + 1) / scale <= value) units += 1;
  return (units / scale).toFixed(digits);
}
