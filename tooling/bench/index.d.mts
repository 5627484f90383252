export type BenchSummaryErrorCode = 'REPO_ROOT_NOT_FOUND' | 'INVALID_PACKAGE_NAME' | 'INVALID_SUMMARY' | 'IO_ERROR';

export declare class BenchSummaryError extends Error {
  constructor(code: BenchSummaryErrorCode, message: string, details?: Record<string, unknown>, cause?: unknown);
  readonly code: BenchSummaryErrorCode;
  readonly details: Record<string, unknown>;
}
export declare function isBenchSummaryError(error: unknown): error is BenchSummaryError;

export declare const WORKSPACE_MARKER: 'pnpm-workspace.yaml';
export declare function findRepoRoot(fromDir?: string): string;

export declare const BENCH_DIR_ENV: 'SPLITZIP_BENCH_DIR';
export declare function benchSummaryDir(options?: { repoRoot?: string }): string;
export declare function benchSummaryPath(packageName: string, options?: { dir?: string }): string;

export interface BenchRowInput {
  metric: string;
  /** Measured in this run; null = not measured by this run. */
  value: number | null;
  unit?: string;
  /** What the value is compared with, measured in the same run. */
  baseline?: string;
  /** The target as text, e.g. ">= 0.9x"; null for a plain throughput row. */
  target?: string | null;
  /** Judged from value; null when this run cannot judge it. */
  met?: boolean | null;
  note?: string;
}
export interface BenchRow {
  metric: string;
  value: number | null;
  unit: string;
  baseline: string;
  target: string | null;
  met: boolean | null;
  note?: string;
}
export interface BenchSummary {
  package: string;
  title: string;
  generatedAt: string;
  environment: Record<string, unknown>;
  rows: BenchRow[];
  raw?: unknown;
}
export declare function writeBenchSummary(options: {
  packageName: string;
  title: string;
  rows: BenchRowInput[];
  environment?: Record<string, unknown>;
  raw?: unknown;
  dir?: string;
  outFile?: string;
}): { path: string; summary: BenchSummary };

export declare function readBenchSummaries(dir: string): {
  summaries: Map<string, BenchSummary>;
  problems: { file: string; reason: string }[];
};

export interface SummaryTableRow {
  package: string;
  metric: string;
  value: string;
  baseline: string;
  target: string;
  met: 'yes' | 'NO' | '—' | '?';
  note: string;
}
export declare function summarizeBenchResults(options: {
  benchPackages: Iterable<string>;
  summaries: Map<string, BenchSummary>;
  nowMs?: number;
  maxAgeMs?: number;
}): { rows: SummaryTableRow[]; targetsMet: number; targetsJudged: number; missing: string[]; stale: string[] };
export declare function formatBenchValue(row: { value: unknown; unit?: string }): string;
