import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Every summary file in `dir`: { summaries: Map<packageName, summary>, problems: [{ file, reason }] }.
 * Two files for one package (a renamed file, an --out copy): the newer generatedAt wins.
 * A file that is not a summary is reported, not thrown: one bad file must not hide the rest.
 */
export function readBenchSummaries(dir) {
  const summaries = new Map();
  const problems = [];
  if (!existsSync(dir)) return { summaries, problems };
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) {
    let summary;
    try {
      summary = JSON.parse(readFileSync(join(dir, file), 'utf8'));
    } catch (error) {
      problems.push({ file, reason: `unreadable: ${error.message}` });
      continue;
    }
    if (summary === null || typeof summary.package !== 'string' || !Array.isArray(summary.rows)) {
      problems.push({ file, reason: 'not a bench summary (no "package" or "rows")' });
      continue;
    }
    const known = summaries.get(summary.package);
    if (known === undefined || timeOf(summary) > timeOf(known)) summaries.set(summary.package, summary);
  }
  return { summaries, problems };
}

function timeOf(summary) {
  const ms = Date.parse(summary.generatedAt);
  return Number.isFinite(ms) ? ms : -Infinity;
}
