/**
 * Scenarios for the fault matrix: three simulated GPUs where GPU 1 is the target of every
 * device-scoped fault (so tests can check that the error lands on GPU 1 and nowhere else), with
 * a MIG-enabled variant for the MIG functions, and the fault entries of docs/scenarios.md.
 */
import { simDevice, type SimScenario } from '../../helpers/sim';

const MiB = 2 ** 20;

/** The GPU every device-scoped fault targets. */
export const TARGET_DEVICE = 1;

/** Number of GPUs in a matrix scenario. */
export const MATRIX_DEVICE_COUNT = 3;

/** One fault entry (docs/scenarios.md "Faults"). */
export interface SimFault {
  function: string;
  device?: number;
  return?: number;
  delayMs?: number;
  hang?: boolean;
  /** Absolute path of a file the call writes a byte to (blocks in the kernel on a frozen filesystem). */
  kernelBlock?: string;
  /** A signal name ('SIGSEGV'...) the call kills its process with. */
  crash?: string;
  fromCall?: number;
  untilCall?: number;
}

function migDevice(slot: number): SimScenario {
  return {
    slot,
    uuid: `MIG-7e570000-0000-4000-8000-00000000010${slot}`,
    gpuInstanceId: slot + 1,
    computeInstanceId: 0,
    memory: { totalBytes: 24 * 1024 * MiB, reservedBytes: 0, usedBytes: 12 * MiB },
    processes: [],
  };
}

/**
 * Three idle GPUs (used memory well under the CLI's default 1 GiB limit) with `faults`.
 * With `mig`, the target GPU has MIG enabled and two MIG devices in slots 0 and 2 (1 is a hole).
 */
export function matrixScenario(faults: SimFault[], options: { mig?: boolean } = {}): SimScenario {
  const devices: SimScenario[] = [];
  for (let index = 0; index < MATRIX_DEVICE_COUNT; index++) {
    const overrides: SimScenario = {
      memory: { totalBytes: 97887 * MiB, reservedBytes: 471 * MiB, usedBytes: 3 * MiB },
      persistenceMode: true,
      computeMode: 'default',
      migMode: false,
      utilization: { gpu: 0, memory: 0 },
      temperatureC: 30 + index,
      powerWatts: 60,
      computeCapability: [12, 0],
    };
    if (options.mig === true && index === TARGET_DEVICE) {
      overrides['migMode'] = true;
      overrides['migDevices'] = [migDevice(0), migDevice(2)];
    }
    devices.push(simDevice(index, overrides));
  }
  return { devices, faults };
}
