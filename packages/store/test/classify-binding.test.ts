import { describe, expect, it } from 'vitest';
import { OBJECT_STAMP_PREFIX, classifyBinding, isBindingStale, shardStampKind, type CacheEntry, type SliceBinding } from '../src/index.js';

const entry = {} as CacheEntry; // classifyBinding looks at the stamps only
const binding = (...stamps: string[]): SliceBinding => ({ entry, stamps });
const FILE_A = '4096:1700000000000000000';
const FILE_B = '4096:1700000000000000001';
const OBJ_A = 'etag:"0123456789abcdef0123456789abcdef"';
const OBJ_B = 'etag:"fedcba9876543210fedcba9876543210-3"';

describe('shardStampKind', () => {
  it('an object stamp starts with etag:, anything else is a file stamp', () => {
    expect(OBJECT_STAMP_PREFIX).toBe('etag:');
    expect(shardStampKind(OBJ_A)).toBe('object');
    expect(shardStampKind('etag:')).toBe('object');
    expect(shardStampKind(FILE_A)).toBe('file');
    expect(shardStampKind('ETAG:"x"')).toBe('file');
    expect(shardStampKind(' etag:"x"')).toBe('file');
  });
});

describe('classifyBinding', () => {
  it('a reader without a stamp trusts every binding', () => {
    expect(classifyBinding(binding(), null)).toBe('trusted');
    expect(classifyBinding(binding(FILE_A), null)).toBe('trusted');
    expect(classifyBinding(binding(OBJ_A), null)).toBe('trusted');
  });

  it('a stamp the binding recorded is trusted, whatever its kind', () => {
    expect(classifyBinding(binding(OBJ_A), OBJ_A)).toBe('trusted');
    expect(classifyBinding(binding(FILE_A, OBJ_B, OBJ_A), OBJ_A)).toBe('trusted');
    expect(classifyBinding(binding(FILE_B, FILE_A), FILE_A)).toBe('trusted');
    expect(classifyBinding(binding(OBJ_A, FILE_A), FILE_A)).toBe('trusted');
  });

  it('any other stamp is unchecked, never trusted by default: the reader checks the bytes', () => {
    expect(classifyBinding(binding(), OBJ_A)).toBe('unchecked');
    expect(classifyBinding(binding(OBJ_B), OBJ_A)).toBe('unchecked');
    expect(classifyBinding(binding(FILE_A), OBJ_A)).toBe('unchecked');
    // A binding without file stamps (legacy, made from an object, or an s3:// cache's) says nothing
    // about a local file of that name: it was trusted before, and a fine-tune got its base's bytes.
    expect(classifyBinding(binding(), FILE_A)).toBe('unchecked');
    expect(classifyBinding(binding(OBJ_A, OBJ_B), FILE_A)).toBe('unchecked');
    // Other file stamps: unchecked too (a copy of the same bytes has other file times).
    expect(classifyBinding(binding(FILE_B), FILE_A)).toBe('unchecked');
    expect(classifyBinding(binding(OBJ_A, FILE_B), FILE_A)).toBe('unchecked');
  });
});

describe('isBindingStale', () => {
  it('a local file whose stamp is not among the binding\'s file stamps, when it has some', () => {
    expect(isBindingStale(binding(FILE_B), FILE_A)).toBe(true);
    expect(isBindingStale(binding(FILE_A), FILE_A)).toBe(false);
    expect(isBindingStale(binding(), FILE_A)).toBe(false);
    expect(isBindingStale(binding(FILE_B), null)).toBe(false);
    // A binding with only object stamps is not stale for a local file (it was before: any stamp counted).
    expect(isBindingStale(binding(OBJ_A), FILE_A)).toBe(false);
    expect(isBindingStale(binding(OBJ_A), OBJ_B)).toBe(false);
  });

  it("a legacy stamp (<size>:<mtime ns>, before 2026-12-05) of the file's size and mtime is not stale; of others it is", () => {
    const now = '4096:1700000000000000000:1700000000000000123:77';
    expect(isBindingStale(binding('4096:1700000000000000000'), now)).toBe(false);
    expect(isBindingStale(binding('4096:1700000000000000001'), now)).toBe(true);
    expect(isBindingStale(binding('4097:1700000000000000000'), now)).toBe(true);
    // A new-form stamp of another inode or ctime is another file.
    expect(isBindingStale(binding('4096:1700000000000000000:1700000000000000123:78'), now)).toBe(true);
    // classifyBinding never takes a legacy stamp for this file: the loader checks the bytes.
    expect(classifyBinding(binding('4096:1700000000000000000'), now)).toBe('unchecked');
  });
});
