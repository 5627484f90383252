/** What `--backend` accepts (kept apart from the encoder so that naming it loads no GPU code). */
export const ENCODE_BACKENDS = ['auto', 'cpu', 'webasm', 'webgpu', 'codec'] as const;
export type EncodeBackend = (typeof ENCODE_BACKENDS)[number];
