/**
 * The one decoder of the addon's wire layout: rebuilds snapshot objects from the flat encoding
 * (numbers + string table) and from readMemory's memory records, with every slot read at the
 * position the addon names for it (src/nvml/wire-layout.ts, resolved once per session). The
 * identity read once at open is formatted once here and merged into every snapshot. Building
 * objects here is much cheaper than through Node-API.
 */
import { nvmlCodeName } from './nvml-error';
import type { NativeCallError, NativeDeviceIdentity, NativeEncodedSnapshot } from './native-binding';
import type { RecordPositions, WireLayout } from './wire-layout';
import { recoveryActionName } from './recovery-action';
import type { FieldError, GpuDevice, GpuIdentity, GpuIdentityFields, GpuMemory, GpuProcess, MigDevice, ProcessKind, Snapshot } from '../types';

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

/** Where a record keeps its memory figures (device and MIG records name them alike). */
type MemoryPositions = RecordPositions<'device'> | RecordPositions<'mig'>;

function memoryAt(reader: Reader, at: MemoryPositions): GpuMemory | null {
  const source = reader.at(at.memSource);
  if (Number.isNaN(source)) return null;
  return {
    totalBytes: reader.at(at.memTotal),
    freeBytes: reader.at(at.memFree),
    usedBytes: reader.at(at.memUsed),
    reservedBytes: source === 1 ? null : nullable(reader.at(at.memReserved)),
    source: source === 1 ? 'v1' : 'v2',
  };
}

/** What never changes for a device during a session, formatted once. */
interface ConstantDeviceFields extends GpuIdentityFields {
  /** The identity-time field errors, copied into each snapshot's fieldErrors (a loop: cheaper than a spread). */
  fieldErrors: ReadonlyArray<readonly [string, FieldError]>;
  /** False when even the device handle failed at open (the general path reports why). */
  usable: boolean;
}

/** Fields of a device the addon named but the session does not know (never expected). */
const UNKNOWN_DEVICE: Omit<ConstantDeviceFields, 'index'> = {
  uuid: null,
  name: null,
  pciBusId: null,
  minorNumber: null,
  computeCapability: null,
  recoveryAction: null,
  fieldErrors: [],
  usable: false,
};

function constantFields(identity: NativeDeviceIdentity): ConstantDeviceFields {
  const { error, ...fields } = identityOf(identity);
  return {
    ...fields,
    fieldErrors: identity.fieldErrors.map((fieldError) => [fieldError.field, fromNativeCallError(fieldError)] as const),
    usable: error === null,
  };
}

/** An identity string as NVML reported it; the addon's empty string for one it could not read is null. */
function reported(text: string): string | null {
  return text === '' ? null : text;
}

/** The identity of a device as read at open, for the session's `devices` (no NVML call). */
export function identityOf(identity: NativeDeviceIdentity): GpuIdentity {
  const capability = identity.computeCapability;
  return {
    index: identity.index,
    uuid: reported(identity.uuid),
    name: reported(identity.name),
    pciBusId: reported(identity.pciBusId),
    minorNumber: identity.minorNumber,
    computeCapability: capability === null ? null : `${capability[0]}.${capability[1]}`,
    recoveryAction: recoveryActionName(identity.recoveryAction),
    error: identity.error === null ? null : fromNativeCallError(identity.error),
  };
}

/** A snapshot's own fieldErrors object, starting with the identity's. */
function fieldErrorsOf(constant: Pick<ConstantDeviceFields, 'fieldErrors'>): Record<string, FieldError> {
  const fieldErrors: Record<string, FieldError> = {};
  for (const [field, error] of constant.fieldErrors) fieldErrors[field] = error;
  return fieldErrors;
}

/** Options that shape the decoded objects. */
export interface DecodeOptions {
  /** The snapshot asked for process lists (so `processes` is present, null when unreadable). */
  processes: boolean;
  takenAt: number;
}

/** Decodes one session's snapshots: the layout is resolved and the identities formatted once. */
export class SnapshotDecoder {
  /** Slots per device of readMemory's output. */
  readonly memorySlots: number;
  readonly #layout: WireLayout;
  /** Per device, by NVML index, what never changes during the session. */
  readonly #constants: readonly ConstantDeviceFields[];

  constructor(layout: WireLayout, identities: readonly NativeDeviceIdentity[]) {
    this.#layout = layout;
    this.memorySlots = layout.memory.slots;
    this.#constants = identities.map(constantFields);
  }

  #kinds(bits: number): ProcessKind[] {
    const bit = this.#layout.processKindBits;
    const kinds: ProcessKind[] = [];
    if (bits & bit.compute) kinds.push('compute');
    if (bits & bit.graphics) kinds.push('graphics');
    if (bits & bit.mps) kinds.push('mps');
    return kinds;
  }

  #processes(reader: Reader, count: number): GpuProcess[] {
    const P = this.#layout.process;
    const processes: GpuProcess[] = [];
    for (let i = 0; i < count; i++) {
      processes.push({
        pid: reader.at(P.pid),
        usedBytes: nullable(reader.at(P.usedBytes)),
        kinds: this.#kinds(reader.at(P.kinds)),
        gpuInstanceId: nullable(reader.at(P.gpuInstanceId)),
        computeInstanceId: nullable(reader.at(P.computeInstanceId)),
      });
      reader.skip(P.slots);
    }
    return processes;
  }

  #mig(reader: Reader, processesRequested: boolean): MigDevice {
    const M = this.#layout.mig;
    const errorCode = reader.at(M.errorCode);
    const processCount = reader.at(M.processCount);
    const mig: MigDevice = {
      index: reader.at(M.slot),
      uuid: reader.text(M.uuid),
      gpuInstanceId: nullable(reader.at(M.gpuInstanceId)),
      computeInstanceId: nullable(reader.at(M.computeInstanceId)),
      memory: memoryAt(reader, M),
      error: Number.isNaN(errorCode) ? null : fieldError(errorCode, reader.text(M.errorSymbol), reader.text(M.errorMessage)),
    };
    reader.skip(M.slots);
    // Asked for but unreadable: `processes` stays absent and `error` says why.
    if (!Number.isNaN(processCount) && processesRequested) mig.processes = this.#processes(reader, processCount);
    return mig;
  }

  /** Decodes one encoded snapshot. */
  decode(encoded: NativeEncodedSnapshot, options: DecodeOptions): Snapshot {
    const { header: H, device: D, error: E } = this.#layout;
    const reader = new Reader(encoded.numbers, encoded.strings);
    const deviceCount = reader.at(H.deviceCount);
    reader.skip(H.slots);
    const devices: GpuDevice[] = [];
    for (let d = 0; d < deviceCount; d++) {
      const index = reader.at(D.index);
      const constant = this.#constants[index] ?? UNKNOWN_DEVICE;
      const fieldErrors = fieldErrorsOf(constant);
      const errorCode = reader.at(D.errorCode);
      const computeMode = reader.at(D.computeMode);
      const persistence = reader.at(D.persistence);
      const migMode = reader.at(D.migMode);
      const utilGpu = reader.at(D.utilGpu);
      const utilMemory = reader.at(D.utilMemory);
      const power = reader.at(D.powerMilliwatts);
      const device: GpuDevice = {
        index,
        uuid: constant.uuid,
        name: constant.name,
        pciBusId: constant.pciBusId,
        minorNumber: constant.minorNumber,
        computeCapability: constant.computeCapability,
        recoveryAction: constant.recoveryAction,
        memory: memoryAt(reader, D),
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
        fieldErrors[reader.text(E.field)] = fieldError(reader.at(E.nvmlReturn), reader.text(E.symbol), reader.text(E.message));
        reader.skip(E.slots);
      }
      if (!Number.isNaN(processCount)) {
        device.processes = this.#processes(reader, processCount);
        device.processListSource = { symbol: processSymbol, strideBytes: nullable(processStride) };
      } else if (options.processes) {
        device.processes = null;
      }
      if (!Number.isNaN(migCount)) {
        const migDevices: MigDevice[] = [];
        for (let m = 0; m < migCount; m++) migDevices.push(this.#mig(reader, options.processes));
        device.migDevices = migDevices;
      }
      devices.push(device);
    }
    return { takenAt: options.takenAt, devices };
  }

  /**
   * A memory-only snapshot of every device from readMemory's output (`memorySlots` per device, in
   * the session's device order). Returns null when any device's read failed: the caller then takes
   * the general path, which explains failures.
   */
  decodeMemory(out: Float64Array, takenAt: number): Snapshot | null {
    const R = this.#layout.memory;
    const slots = R.slots;
    const constants = this.#constants;
    const devices: GpuDevice[] = new Array<GpuDevice>(constants.length);
    for (let i = 0; i < constants.length; i++) {
      const constant = constants[i] as ConstantDeviceFields;
      const base = i * slots;
      if (!constant.usable || out[base + R.nvmlReturn] !== 0) return null;
      const reserved = out[base + R.reservedBytes] as number;
      const v1 = Number.isNaN(reserved);
      devices[i] = {
        index: constant.index,
        uuid: constant.uuid,
        name: constant.name,
        pciBusId: constant.pciBusId,
        minorNumber: constant.minorNumber,
        computeCapability: constant.computeCapability,
        recoveryAction: constant.recoveryAction,
        memory: {
          totalBytes: out[base + R.totalBytes] as number,
          freeBytes: out[base + R.freeBytes] as number,
          usedBytes: out[base + R.usedBytes] as number,
          reservedBytes: v1 ? null : reserved,
          source: v1 ? 'v1' : 'v2',
        },
        persistenceMode: null,
        computeMode: null,
        migMode: null,
        utilization: null,
        temperatureC: null,
        powerWatts: null,
        error: null,
        fieldErrors: fieldErrorsOf(constant),
      };
    }
    return { takenAt, devices };
  }
}
