/** tsup `esbuildOptions`: a correctly escaped `import.meta.url` in CommonJS builds, and referenceSources (see index.mjs). */
export declare function cjsImportMetaUrl(
  options: { define?: Record<string, string>; banner?: Record<string, string>; sourcesContent?: boolean },
  context: { format: string },
): void;

/** tsup `esbuildOptions`: source maps naming the sources without embedding them (see index.mjs). */
export declare function referenceSources(options: { sourcesContent?: boolean }): void;
