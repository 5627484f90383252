import { fileURLToPath } from 'node:url';

const SHIM_PATH = fileURLToPath(new URL('./import-meta-url-shim.mjs', import.meta.url));

/**
 * tsup `esbuildOptions` for packages whose CommonJS build uses `import.meta.url` (worker scripts
 * and modules found beside the bundle). tsup's own `shims: true` writes `new URL("file:" +
 * __filename)`, which does not escape the path: under a directory named `a#1` or `b%41` the URL
 * lost everything after `#` or decoded `%41`, and workers, the S3 SDK and beside-the-bundle files
 * were looked up in the wrong place. This injects `pathToFileURL(__filename).href` instead.
 * Builds in other formats are left alone.
 */
export function cjsImportMetaUrl(options, context) {
  if (context.format !== 'cjs') return;
  options.define = { ...options.define, 'import.meta.url': 'splitzipImportMetaUrl' };
  options.inject = [...(options.inject ?? []), SHIM_PATH];
}
