// The slice of the WebGPU API the native decoder uses, typed here: the DOM lib's WebGPU types are
// not assumed (Node builds, and TypeScript's lib has none for Dawn's binding).

export interface GpuBufferNative {
  readonly size: number;
  mapAsync(mode: number, offset?: number, size?: number): Promise<void>;
  getMappedRange(offset?: number, size?: number): ArrayBuffer;
  unmap(): void;
  destroy(): void;
}

export interface GpuBindGroupEntry {
  binding: number;
  resource: { buffer: GpuBufferNative; offset?: number; size?: number };
}

export interface GpuComputePipelineNative {
  getBindGroupLayout(index: number): unknown;
}

export interface GpuComputePassNative {
  setPipeline(pipeline: GpuComputePipelineNative): void;
  setBindGroup(index: number, group: unknown): void;
  dispatchWorkgroups(x: number, y?: number, z?: number): void;
  end(): void;
}

export interface GpuCommandEncoderNative {
  beginComputePass(): GpuComputePassNative;
  copyBufferToBuffer(source: GpuBufferNative, sourceOffset: number, destination: GpuBufferNative, destinationOffset: number, size: number): void;
  finish(): unknown;
}

export interface GpuDeviceNative {
  readonly limits: {
    maxStorageBufferBindingSize: number;
    maxBufferSize: number;
    maxComputeWorkgroupsPerDimension: number;
  };
  readonly queue: {
    writeBuffer(buffer: GpuBufferNative, bufferOffset: number, data: ArrayBufferView | ArrayBuffer, dataOffset?: number, size?: number): void;
    submit(commandBuffers: unknown[]): void;
    onSubmittedWorkDone(): Promise<void>;
  };
  createBuffer(descriptor: { size: number; usage: number; mappedAtCreation?: boolean }): GpuBufferNative;
  createShaderModule(descriptor: { code: string }): {
    getCompilationInfo?(): Promise<{ messages: ReadonlyArray<{ type: string; message: string; lineNum: number; linePos: number }> }>;
  };
  createComputePipeline(descriptor: { layout: 'auto'; compute: { module: unknown; entryPoint: string } }): GpuComputePipelineNative;
  createBindGroup(descriptor: { layout: unknown; entries: GpuBindGroupEntry[] }): unknown;
  createCommandEncoder(): GpuCommandEncoderNative;
  pushErrorScope(filter: 'validation' | 'out-of-memory' | 'internal'): void;
  popErrorScope(): Promise<{ message: string } | null>;
}

/** GPUBufferUsage and GPUMapMode values, fixed by the WebGPU spec. */
export const USAGE = { MAP_READ: 0x1, MAP_WRITE: 0x2, COPY_SRC: 0x4, COPY_DST: 0x8, UNIFORM: 0x40, STORAGE: 0x80 } as const;
export const MAP_MODE = { READ: 0x1, WRITE: 0x2 } as const;
