/**
 * The rows of the one summary table: every package with a bench script and every summary found.
 * A package without results is a row of its own (met '?'), and results older than maxAgeMs (or
 * without a readable time) are marked stale, so a missing or old benchmark never looks green.
 * Returns { rows: [{ package, metric, value, baseline, target, met, note }] (all strings),
 *           targetsMet, targetsJudged, missing: [names], stale: [names] }.
 */
export function summarizeBenchResults({ benchPackages, summaries, nowMs = Date.now(), maxAgeMs = 3 * 3600_000 }) {
  const rows = [];
  const missing = [];
  const stale = [];
  let targetsMet = 0;
  let targetsJudged = 0;
  for (const name of [...new Set([...benchPackages, ...summaries.keys()])].sort()) {
    const summary = summaries.get(name);
    if (summary === undefined) {
      missing.push(name);
      rows.push({ package: name, metric: '(no results: its bench wrote no .cache/bench file)', value: '', baseline: '', target: '', met: '?', note: '' });
      continue;
    }
    const generatedMs = Date.parse(summary.generatedAt);
    const ageMs = nowMs - generatedMs;
    const isStale = !Number.isFinite(generatedMs) || ageMs > maxAgeMs;
    if (isStale) stale.push(name);
    const staleNote = !isStale ? '' : Number.isFinite(generatedMs) ? `[stale: ${(ageMs / 3600_000).toFixed(1)} h old]` : '[stale: no time]';
    for (const row of summary.rows) {
      // Stale results still show their value, but their met does not count.
      if (!isStale && (row.met === true || row.met === false)) {
        targetsJudged += 1;
        if (row.met) targetsMet += 1;
      }
      rows.push({
        package: name,
        metric: String(row.metric ?? ''),
        value: formatBenchValue(row),
        baseline: String(row.baseline ?? ''),
        target: row.target == null ? '—' : String(row.target),
        met: row.met === true ? 'yes' : row.met === false ? 'NO' : '—',
        note: [staleNote, row.note ?? ''].filter(Boolean).join(' '),
      });
    }
  }
  return { rows, targetsMet, targetsJudged, missing, stale };
}

/** 1.234 x → "1.23x"; 8.8 GB/s → "8.80 GB/s"; tiny values in exponent form; null → "n/a". */
export function formatBenchValue(row) {
  const { value, unit } = row;
  if (typeof value !== 'number' || !Number.isFinite(value)) return 'n/a';
  const magnitude = Math.abs(value);
  const text =
    magnitude !== 0 && magnitude < 0.01 ? value.toExponential(2) : value.toFixed(magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : 2);
  if (!unit) return text;
  return unit === 'x' ? `${text}x` : `${text} ${unit}`;
}
