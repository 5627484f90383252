// The shipped source maps name src/ (shipped too) instead of embedding it: the embedded sources
// were most of the tarball, once per format (@splitzip/tsup-config's referenceSources).
import { checkShippedSourceMaps } from '@splitzip/test-support/source-maps';
import { expect, it } from 'vitest';

it('every shipped map has no sourcesContent, and every source it names is in the tarball', () => {
  const found = checkShippedSourceMaps(new URL('..', import.meta.url));
  expect(found.maps.length).toBeGreaterThan(0);
  expect(found.maps).toEqual(found.expectedMaps);
  expect(found.withSourcesContent).toEqual([]);
  expect(found.missingSources).toEqual([]);
}, 60_000);
