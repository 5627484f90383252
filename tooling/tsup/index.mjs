/**
 * The first line of a CommonJS build that uses `import.meta.url`: the URL as Node computes it for
 * ESM. tsup's own `shims: true` writes `new URL("file:" + __filename)`, which does not escape the
 * path: under a directory named `a#1` or `b%41` the URL lost everything after `#` or decoded `%41`,
 * and workers, the S3 SDK and beside-the-bundle files were looked up in the wrong place. A banner,
 * not an injected file: an injected file is one of the build's sources, and the source maps name
 * their sources (referenceSources) where a package ships them, which it could not do for a file of
 * this tooling package.
 */
// "use strict" first: the build's own directive comes after the banner, where it is no directive.
const IMPORT_META_URL_BANNER = '"use strict";\nvar splitzipImportMetaUrl = require("node:url").pathToFileURL(__filename).href;';

/**
 * tsup `esbuildOptions` for packages whose CommonJS build uses `import.meta.url` (worker scripts
 * and modules found beside the bundle): `pathToFileURL(__filename).href` in its place. Builds in
 * other formats are left alone. Calls referenceSources too.
 */
export function cjsImportMetaUrl(options, context) {
  referenceSources(options);
  if (context.format !== 'cjs') return;
  options.define = { ...options.define, 'import.meta.url': 'splitzipImportMetaUrl' };
  const banner = options.banner?.js;
  options.banner = { ...options.banner, js: banner ? `${IMPORT_META_URL_BANNER}\n${banner}` : IMPORT_META_URL_BANNER };
}

/**
 * tsup `esbuildOptions`: source maps that name the sources (`../src/…`) without embedding them
 * (`sourcesContent`), which were most of each tarball, once per format; the package ships `src/`
 * for them to resolve (its `files`).
 */
export function referenceSources(options) {
  options.sourcesContent = false;
}
