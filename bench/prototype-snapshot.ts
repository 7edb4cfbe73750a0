/**
 * A prototype used only by the benchmark: a memory-only snapshot built in JavaScript from the
 * addon's fastest read (`readMemorySync` into a reused Float64Array) plus identity fields
 * computed once per session. It produces the same object shape as `snapshotSync({ memoryOnly:
 * true })` and shows what that call could cost if the addon filled a reused array instead of
 * allocating a new encoding (and native objects) per poll. See docs/benchmarks.md.
 */
import type { GpuDevice, NvmlMemoryReader, Snapshot } from '../src/types';

/** Slots per device written by readMemorySync: total, free, used, reserved, nvmlReturn. */
const MEMORY_SLOTS = 5;

/** Returns a function taking one memory-only snapshot the prototype way. */
export function prototypeMemorySnapshot(session: NvmlMemoryReader, first: Snapshot): () => Snapshot {
  const identities = first.devices.map((device) => ({
    index: device.index,
    uuid: device.uuid,
    name: device.name,
    pciBusId: device.pciBusId,
    minorNumber: device.minorNumber,
    computeCapability: device.computeCapability,
    source: device.memory?.source ?? 'v2',
  }));
  const out = new Float64Array(identities.length * MEMORY_SLOTS);
  return () => {
    session.readMemorySync(out);
    const devices: GpuDevice[] = new Array<GpuDevice>(identities.length);
    for (let i = 0; i < identities.length; i++) {
      const id = identities[i]!;
      const base = i * MEMORY_SLOTS;
      const nvmlReturn = out[base + 4]!;
      const reserved = out[base + 3]!;
      devices[i] = {
        index: id.index,
        uuid: id.uuid,
        name: id.name,
        pciBusId: id.pciBusId,
        minorNumber: id.minorNumber,
        computeCapability: id.computeCapability,
        memory:
          nvmlReturn === 0
            ? { totalBytes: out[base]!, freeBytes: out[base + 1]!, usedBytes: out[base + 2]!, reservedBytes: Number.isNaN(reserved) ? null : reserved, source: id.source }
            : null,
        persistenceMode: null,
        computeMode: null,
        migMode: null,
        utilization: null,
        temperatureC: null,
        powerWatts: null,
        error: nvmlReturn === 0 ? null : { code: `NVML_ERROR_${nvmlReturn}`, nvmlReturn, fn: 'nvmlDeviceGetMemoryInfo', message: 'memory read failed' },
        fieldErrors: {},
      };
    }
    return { takenAt: Date.now(), devices };
  };
}
