// A fake WebGPU device without a GPU (Dawn does not load on this machine) that keeps buffer
// memory and enforces the mapping rules the readback depends on: a copy executes at submit and
// reads/writes real bytes; submitting a copy that touches a mapped or pending buffer, mapping a
// buffer that is not unmapped, or reading a range that is not mapped is a validation error
// (recorded, and thrown where WebGPU rejects); an unmapped range is detached, so a late read
// throws. Mappings resolve after a macrotask, in order, as a queue's would (one whose buffer was
// destroyed meanwhile rejects, as WebGPU's does). Shaders do not run:
// output buffers (STORAGE | COPY_SRC) start filled with a known pattern (`patternAt`) instead.
import type { GpuBufferNative, GpuDeviceNative } from '../src/webgpu-types.js';
import type { BackendImpl } from '../src/backend-impl.js';

type MapState = 'unmapped' | 'pending' | 'mapped' | 'destroyed';

export interface StrictFakeBuffer extends GpuBufferNative {
  readonly id: number;
  readonly usage: number;
  readonly bytes: Uint8Array;
  state: MapState;
}

export interface StrictFakeDevice extends GpuDeviceNative {
  /** WebGPU validation errors the decoder caused (must stay empty). */
  readonly errors: string[];
  /** `submit copy(from->to)...` and `map N` / `unmap N` / `host read N` events, in order. */
  readonly events: string[];
  readonly buffers: StrictFakeBuffer[];
  /** Mappings pending now, and the most seen at once. */
  readonly pendingMaps: number;
  readonly maxPendingMaps: number;
  /** Makes the `n`-th mapAsync from now (1 = the next) of a buffer of this usage (any: all) reject, as a lost device does. */
  failMapAfter(n: number, usage?: number): void;
}

const OUTPUT_USAGE = 0x80 | 0x4;

/** The u16 an output buffer of this id holds at value `j` before anything writes it. */
export function patternAt(id: number, j: number): number {
  return (Math.imul(j + 1, 0x9e3779b1) ^ Math.imul(id, 0x85ebca6b)) >>> 16;
}

export function createStrictFakeDevice(limits: Partial<GpuDeviceNative['limits']> = {}): StrictFakeDevice {
  const errors: string[] = [];
  const events: string[] = [];
  const buffers: StrictFakeBuffer[] = [];
  let pendingMaps = 0;
  let maxPendingMaps = 0;
  let failIn = 0;
  let failUsage: number | undefined;
  /** Mappings resolve in request order, each a macrotask after the one before. */
  let mapTail: Promise<void> = Promise.resolve();

  const usable = (buffer: StrictFakeBuffer, what: string): boolean => {
    if (buffer.state === 'unmapped') return true;
    errors.push(`${what}: buffer ${buffer.id} is ${buffer.state}`);
    return false;
  };

  const createBuffer = ({ size, usage, mappedAtCreation }: { size: number; usage: number; mappedAtCreation?: boolean }): StrictFakeBuffer => {
    const bytes = new Uint8Array(size);
    const id = buffers.length;
    if (usage === OUTPUT_USAGE) {
      const values = new Uint16Array(bytes.buffer, 0, size >> 1);
      for (let j = 0; j < values.length; j++) values[j] = patternAt(id, j);
    }
    let ranges: ArrayBuffer[] = [];
    /** The byte ranges getMappedRange returned since the mapping: WebGPU refuses an overlapping one. */
    let returned: [number, number][] = [];
    /** The mapped window [offset, offset + length), to check getMappedRange against. */
    let window: [number, number] = [0, size];
    const buffer: StrictFakeBuffer = {
      id,
      usage,
      size,
      bytes,
      state: mappedAtCreation ? 'mapped' : 'unmapped',
      mapAsync(_mode: number, offset = 0, length = size - offset) {
        if (buffer.state !== 'unmapped') {
          errors.push(`mapAsync: buffer ${id} is ${buffer.state}`);
          return Promise.reject(new Error(`OperationError: buffer ${id} is ${buffer.state}`));
        }
        buffer.state = 'pending';
        pendingMaps++;
        maxPendingMaps = Math.max(maxPendingMaps, pendingMaps);
        const fail = failIn > 0 && (failUsage === undefined || failUsage === usage) && --failIn === 0;
        window = [offset, offset + length];
        const done = mapTail.then(() => new Promise<void>((resolve) => setTimeout(resolve, 0)));
        mapTail = done;
        return done.then(() => {
          pendingMaps--;
          if (buffer.state === 'destroyed') {
            // WebGPU rejects a mapping its buffer was destroyed under (AbortError): no revival.
            events.push(`map ${id} aborted`);
            throw new Error(`AbortError: buffer ${id} was destroyed before mapping was resolved`);
          }
          if (fail) {
            buffer.state = 'unmapped';
            throw new Error(`OperationError: mapping buffer ${id} failed (device lost)`);
          }
          buffer.state = 'mapped';
          events.push(`map ${id}`);
        });
      },
      getMappedRange(offset = 0, length = size - offset) {
        if (buffer.state !== 'mapped' || offset < window[0] || offset + length > window[1]) {
          errors.push(`getMappedRange: buffer ${id} is ${buffer.state}, range ${offset}+${length} outside ${window.join('..')}`);
          throw new Error('OperationError: range not mapped');
        }
        if (returned.some(([from, to]) => offset < to && from < offset + length)) {
          errors.push(`getMappedRange: buffer ${id} range ${offset}+${length} overlaps a range returned before`);
          throw new Error('OperationError: getMappedRange overlaps with previously returned range');
        }
        returned.push([offset, offset + length]);
        events.push(`host read ${id}`);
        const range = bytes.slice(offset, offset + length).buffer;
        ranges.push(range);
        return range;
      },
      unmap() {
        if (buffer.state === 'pending') {
          // WebGPU: unmap of a pending mapping rejects it; the readback never does this.
          errors.push(`unmap: buffer ${id} is pending`);
        }
        for (const range of ranges) structuredClone(range, { transfer: [range] }); // detached, as WebGPU does
        ranges = [];
        returned = [];
        if (buffer.state === 'mapped') events.push(`unmap ${id}`);
        if (buffer.state !== 'destroyed') buffer.state = 'unmapped';
      },
      destroy() {
        buffer.state = 'destroyed';
      },
    };
    buffers.push(buffer);
    return buffer;
  };

  const device: StrictFakeDevice = {
    errors,
    events,
    buffers,
    get pendingMaps() {
      return pendingMaps;
    },
    get maxPendingMaps() {
      return maxPendingMaps;
    },
    failMapAfter(n: number, usage?: number) {
      failIn = n;
      failUsage = usage;
    },
    limits: { maxStorageBufferBindingSize: 2 ** 31, maxBufferSize: 2 ** 32, maxComputeWorkgroupsPerDimension: 65535, ...limits },
    queue: {
      writeBuffer(buffer) {
        usable(buffer as StrictFakeBuffer, 'writeBuffer');
      },
      submit(commands: unknown[]) {
        for (const command of commands) {
          const copies = (command as { copies: Array<() => string> }).copies;
          events.push(`submit ${copies.map((run) => run()).join(' ') || 'dispatches'}`);
        }
      },
      onSubmittedWorkDone: () => new Promise<void>((resolve) => setTimeout(resolve, 0)),
    },
    createBuffer,
    createShaderModule: () => ({ getCompilationInfo: () => Promise.resolve({ messages: [] }) }),
    createComputePipeline: () => ({ getBindGroupLayout: () => ({}) }),
    createBindGroup: () => ({}),
    createCommandEncoder() {
      const copies: Array<() => string> = [];
      return {
        beginComputePass: () => ({ setPipeline() {}, setBindGroup() {}, dispatchWorkgroups() {}, end() {} }),
        copyBufferToBuffer(source, sourceOffset, destination, destinationOffset, size) {
          const from = source as StrictFakeBuffer;
          const to = destination as StrictFakeBuffer;
          if (sourceOffset % 4 !== 0 || destinationOffset % 4 !== 0 || size % 4 !== 0) errors.push(`copy: unaligned ${sourceOffset} ${destinationOffset} ${size}`);
          if (sourceOffset + size > from.size || destinationOffset + size > to.size) errors.push(`copy: out of bounds ${sourceOffset}+${size} of ${from.size}, ${destinationOffset} of ${to.size}`);
          // Executed at submit, when the buffers' states are checked.
          copies.push(() => {
            if (usable(from, 'submit') && usable(to, 'submit')) to.bytes.set(from.bytes.subarray(sourceOffset, sourceOffset + size), destinationOffset);
            return `copy(${from.id}->${to.id})`;
          });
        },
        finish: () => ({ copies }),
      };
    },
    pushErrorScope() {},
    popErrorScope: () => Promise.resolve(null),
  };
  return device;
}

/** The encode side of a webgpu backend built on the fake device by a test that only decodes. */
export const unusedEncoder: BackendImpl = {
  name: 'webgpu',
  decode: () => Promise.reject(new Error('unused')),
  decodeToDevice: () => Promise.reject(new Error('unused')),
  encode: () => Promise.reject(new Error('unused')),
  dispose: () => Promise.resolve(),
};
