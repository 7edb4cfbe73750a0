/**
 * Rebuilds snapshot objects from the addon's flat encoding (numbers + string table), merging in
 * the identity read once at open. Building objects here is much cheaper than through Node-API.
 */
import { nvmlCodeName } from './nvml-error';
import { ENCODING, PROCESS_KIND_BITS } from './native-binding';
import type { NativeCallError, NativeDeviceIdentity, NativeEncodedSnapshot } from './native-binding';
import type { FieldError, GpuDevice, GpuMemory, GpuProcess, MigDevice, ProcessKind, Snapshot } from '../types';

/** Code used when a process list was returned but failed the plausibility check at every stride. */
export const IMPLAUSIBLE_PROCESS_LIST = 'GPUGATE_PROCESS_LIST_IMPLAUSIBLE';

const COMPUTE_MODES = ['default', 'exclusive_thread', 'prohibited', 'exclusive_process'] as const;

function nullable(value: number | undefined): number | null {
  return value === undefined || Number.isNaN(value) ? null : value;
}

function fieldError(nvmlReturn: number, fn: string, message: string): FieldError {
  return { code: nvmlReturn === 0 ? IMPLAUSIBLE_PROCESS_LIST : nvmlCodeName(nvmlReturn), nvmlReturn, fn, message };
}

/** Converts an identity-time error from the addon into a {@link FieldError}. */
export function fromNativeCallError(error: NativeCallError): FieldError {
  return fieldError(error.nvmlReturn, error.fn, error.message);
}

class Reader {
  position = 0;
  constructor(
    private readonly numbers: Float64Array,
    private readonly strings: string[],
  ) {}
  at(offset: number): number {
    return this.numbers[this.position + offset] ?? Number.NaN;
  }
  text(offset: number): string {
    const index = this.at(offset);
    return Number.isNaN(index) ? '' : (this.strings[index] ?? '');
  }
  skip(count: number): void {
    this.position += count;
  }
}

function memoryAt(reader: Reader, base: number): GpuMemory | null {
  const source = reader.at(base + 4);
  if (Number.isNaN(source)) return null;
  return {
    totalBytes: reader.at(base),
    freeBytes: reader.at(base + 1),
    usedBytes: reader.at(base + 2),
    reservedBytes: source === 1 ? null : nullable(reader.at(base + 3)),
    source: source === 1 ? 'v1' : 'v2',
  };
}

function kindsOf(bits: number): ProcessKind[] {
  const kinds: ProcessKind[] = [];
  if (bits & PROCESS_KIND_BITS.compute) kinds.push('compute');
  if (bits & PROCESS_KIND_BITS.graphics) kinds.push('graphics');
  if (bits & PROCESS_KIND_BITS.mps) kinds.push('mps');
  return kinds;
}

function readProcesses(reader: Reader, count: number): GpuProcess[] {
  const processes: GpuProcess[] = [];
  for (let i = 0; i < count; i++) {
    processes.push({
      pid: reader.at(0),
      usedBytes: nullable(reader.at(1)),
      kinds: kindsOf(reader.at(2)),
      gpuInstanceId: nullable(reader.at(3)),
      computeInstanceId: nullable(reader.at(4)),
    });
    reader.skip(ENCODING.processSlots);
  }
  return processes;
}

function readMig(reader: Reader, processesRequested: boolean): MigDevice {
  const M = ENCODING.mig;
  const errorCode = reader.at(M.errorCode);
  const processCount = reader.at(M.processCount);
  const mig: MigDevice = {
    index: reader.at(M.slot),
    uuid: reader.text(M.uuid),
    gpuInstanceId: nullable(reader.at(M.gpuInstanceId)),
    computeInstanceId: nullable(reader.at(M.computeInstanceId)),
    memory: memoryAt(reader, M.memTotal),
    error: Number.isNaN(errorCode) ? null : fieldError(errorCode, reader.text(M.errorSymbol), reader.text(M.errorMessage)),
  };
  reader.skip(M.slots);
  // Asked for but unreadable: `processes` stays absent and `error` says why.
  if (!Number.isNaN(processCount) && processesRequested) mig.processes = readProcesses(reader, processCount);
  return mig;
}

/** Options that shape the decoded objects. */
export interface DecodeOptions {
  /** The snapshot asked for process lists (so `processes` is present, null when unreadable). */
  processes: boolean;
  takenAt: number;
}

/**
 * Decodes one encoded snapshot. `identities` are the session's devices by NVML index.
 * Throws an Error if the encoding version differs (a stale build of the addon).
 */
export function decodeSnapshot(
  encoded: NativeEncodedSnapshot,
  identities: readonly NativeDeviceIdentity[],
  options: DecodeOptions,
): Snapshot {
  const reader = new Reader(encoded.numbers, encoded.strings);
  const version = reader.at(0);
  if (version !== ENCODING.version) {
    throw new Error(
      `gpugate: the native addon encodes snapshots as version ${version}, this TypeScript expects ${ENCODING.version}; rebuild the addon (npm run build:native)`,
    );
  }
  const deviceCount = reader.at(1);
  reader.skip(ENCODING.headerSlots);
  const D = ENCODING.device;
  const devices: GpuDevice[] = [];
  for (let d = 0; d < deviceCount; d++) {
    const index = reader.at(D.index);
    const identity = identities[index];
    const fieldErrors: Record<string, FieldError> = {};
    for (const error of identity?.fieldErrors ?? []) fieldErrors[error.field] = fromNativeCallError(error);
    const errorCode = reader.at(D.errorCode);
    const computeMode = reader.at(D.computeMode);
    const persistence = reader.at(D.persistence);
    const migMode = reader.at(D.migMode);
    const utilGpu = reader.at(D.utilGpu);
    const utilMemory = reader.at(D.utilMemory);
    const power = reader.at(D.powerMilliwatts);
    const capability = identity?.computeCapability ?? null;
    const device: GpuDevice = {
      index,
      uuid: identity?.uuid ?? '',
      name: identity?.name ?? '',
      pciBusId: identity?.pciBusId ?? '',
      minorNumber: identity?.minorNumber ?? null,
      computeCapability: capability === null ? null : `${capability[0]}.${capability[1]}`,
      memory: memoryAt(reader, D.memTotal),
      persistenceMode: Number.isNaN(persistence) ? null : persistence !== 0,
      computeMode: Number.isNaN(computeMode) ? null : (COMPUTE_MODES[computeMode] ?? null),
      migMode: Number.isNaN(migMode) ? null : migMode !== 0,
      utilization:
        Number.isNaN(utilGpu) || Number.isNaN(utilMemory) ? null : { gpuPercent: utilGpu, memoryPercent: utilMemory },
      temperatureC: nullable(reader.at(D.temperatureC)),
      powerWatts: Number.isNaN(power) ? null : power / 1000,
      error: Number.isNaN(errorCode) ? null : fieldError(errorCode, reader.text(D.errorSymbol), reader.text(D.errorMessage)),
      fieldErrors,
    };
    const fieldErrorCount = reader.at(D.fieldErrorCount);
    const processCount = reader.at(D.processCount);
    const processSymbol = reader.text(D.processSymbol);
    const processStride = reader.at(D.processStride);
    const migCount = reader.at(D.migCount);
    reader.skip(D.slots);
    for (let e = 0; e < fieldErrorCount; e++) {
      fieldErrors[reader.text(0)] = fieldError(reader.at(1), reader.text(2), reader.text(3));
      reader.skip(ENCODING.errorSlots);
    }
    if (!Number.isNaN(processCount)) {
      device.processes = readProcesses(reader, processCount);
      device.processListSource = { symbol: processSymbol, strideBytes: nullable(processStride) };
    } else if (options.processes) {
      device.processes = null;
    }
    if (!Number.isNaN(migCount)) {
      const migDevices: MigDevice[] = [];
      for (let m = 0; m < migCount; m++) migDevices.push(readMig(reader, options.processes));
      device.migDevices = migDevices;
    }
    devices.push(device);
  }
  return { takenAt: options.takenAt, devices };
}
