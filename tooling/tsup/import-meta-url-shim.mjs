// Injected into CommonJS builds only (see index.mjs): import.meta.url as Node computes it for ESM.
import { pathToFileURL } from 'node:url';

export const splitzipImportMetaUrl = pathToFileURL(__filename).href;
