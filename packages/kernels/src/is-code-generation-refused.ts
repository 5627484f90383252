/**
 * Whether this realm refuses to generate code from strings (`new Function`). gpu.js's cpu backend
 * compiles every kernel that way; a page whose Content Security Policy lacks 'unsafe-eval', or Node
 * run with --disallow-code-generation-from-strings, refuses it, and gpu.js then reports only
 * '"run" not defined on CPUKernel' (the EvalError goes to its console.error). Asked only after the
 * cpu backend failed to start: under a CSP the attempt posts a violation report.
 */
export function isCodeGenerationRefused(): boolean {
  try {
    new Function('return 0');
    return false;
  } catch (error) {
    return error instanceof EvalError;
  }
}

/** The start-up failure a refusal explains, in the words a fallback reason gives it. */
export const CODE_GENERATION_REFUSED =
  "code generation from strings is refused here (a Content Security Policy without 'unsafe-eval', or Node's --disallow-code-generation-from-strings), and gpu.js's cpu backend compiles every kernel with new Function";
