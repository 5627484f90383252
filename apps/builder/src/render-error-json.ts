// What a command given --json prints on stdout when it fails (exit 1, 2, 130, 143): one JSON
// document, so that `splitzip build … --json > report.json` leaves a file that parses.

interface ErrorFields {
  code?: unknown;
  file?: unknown;
  path?: unknown;
  tensor?: unknown;
  otherTensor?: unknown;
  entry?: unknown;
  offsets?: unknown;
  context?: unknown;
  details?: unknown;
}

/**
 * `{ "error": { code, message, ...context } }`: `message` is the line stderr says after the
 * command's prefix; the context is the typed error's (a builder error's `context`, a store error's
 * `path`, `entry` and `details`, the safetensors reader's `file`, `tensor`, `offsets`). An error
 * carrying the report of the work it finished (`context.report`: a build stopped by a signal,
 * `interrupted: true`) prints that report with `error` added: still one document.
 */
export function renderErrorJson(error: unknown, message: string): string {
  const e = (typeof error === 'object' && error !== null ? error : {}) as ErrorFields;
  const code = typeof e.code === 'string' ? e.code : 'INTERNAL';
  const context: Record<string, unknown> = {};
  for (const key of ['file', 'path', 'tensor', 'otherTensor', 'entry', 'offsets'] as const) {
    if (e[key] !== undefined) context[key] = e[key];
  }
  Object.assign(context, isRecord(e.details) ? e.details : {}, isRecord(e.context) ? e.context : {});
  const { report, code: _code, message: _message, cause: _cause, ...rest } = context;
  const body = { code, message, ...rest };
  const document = isRecord(report) ? { ...report, error: body } : { error: body };
  try {
    return `${JSON.stringify(document, toJsonValue, 2)}\n`;
  } catch {
    // A context that does not serialize (a cycle) must not cost the document.
    return `${JSON.stringify({ ...(isRecord(report) ? report : {}), error: { code, message } }, toJsonValue, 2)}\n`;
  }
}

/** BigInts (offsets past 2^53) as decimal strings: JSON.stringify throws on them. */
function toJsonValue(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? value.toString() : value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
