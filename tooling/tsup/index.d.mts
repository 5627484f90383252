/** tsup `esbuildOptions`: a correctly escaped `import.meta.url` in CommonJS builds (see index.mjs). */
export declare function cjsImportMetaUrl(
  options: { define?: Record<string, string>; inject?: string[] },
  context: { format: string },
): void;
