/**
 * Simulator scenarios for the poll-latency benchmark: N identical GPUs, each with P processes,
 * optionally with a process-list call slowed down to imitate a real driver's expensive query.
 * Written as JSON files (docs/scenarios.md format) into a directory the harness chooses.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** The sizes the benchmark measures: devices × processes per device. */
export const BENCH_DEVICE_COUNTS = [1, 8, 16] as const;
export const BENCH_PROCESS_COUNTS = [0, 2, 8] as const;

/** What to put in one generated scenario. */
export interface BenchScenarioSpec {
  devices: number;
  processesPerDevice: number;
  /** When set, device 0's compute process-list call sleeps this long (the event-loop delay measure). */
  processListDelayMs?: number;
}

const GIB = 1024 * 1024 * 1024;

function hex(value: number, width: number): string {
  return value.toString(16).padStart(width, '0');
}

/** The scenario object for one size (plain JSON-compatible data). */
export function benchScenario(spec: BenchScenarioSpec): Record<string, unknown> {
  const devices = [];
  for (let index = 0; index < spec.devices; index++) {
    const processes = [];
    for (let p = 0; p < spec.processesPerDevice; p++) {
      processes.push({
        pid: 100_000 + index * 100 + p,
        usedBytes: 2 * GIB,
        kinds: p % 4 === 3 ? ['compute', 'graphics'] : ['compute'],
        name: `bench-worker-${index}-${p}`,
      });
    }
    devices.push({
      name: 'NVIDIA RTX PRO 6000 Blackwell Server Edition',
      uuid: `GPU-be7c0000-0000-4000-8000-${hex(index, 12)}`,
      pciBusId: `00000000:${hex(0x10 + index, 2).toUpperCase()}:00.0`,
      minorNumber: index,
      computeCapability: [12, 0],
      memory: {
        totalBytes: 102_641_106_944,
        reservedBytes: 503_316_480,
        usedBytes: spec.processesPerDevice * 2 * GIB,
      },
      persistenceMode: true,
      computeMode: 'default',
      migMode: false,
      utilization: { gpu: 0, memory: 0 },
      temperatureC: 31,
      powerWatts: 62.5,
      processes,
    });
  }
  const scenario: Record<string, unknown> = {
    system: { driverVersion: '580.95.05', nvmlVersion: '13.580.95.05', cudaDriverVersion: 13000 },
    devices,
  };
  if (spec.processListDelayMs !== undefined) {
    scenario['faults'] = [
      { function: 'nvmlDeviceGetComputeRunningProcesses_v3', device: 0, delayMs: spec.processListDelayMs },
    ];
  }
  return scenario;
}

/** File name of a generated scenario, e.g. `bench-8x2.json` or `bench-8x2-delay5ms.json`. */
export function benchScenarioName(spec: BenchScenarioSpec): string {
  const delay = spec.processListDelayMs === undefined ? '' : `-delay${spec.processListDelayMs}ms`;
  return `bench-${spec.devices}x${spec.processesPerDevice}${delay}.json`;
}

/** Write the scenario for `spec` into `directory` and return its path. */
export function writeBenchScenario(directory: string, spec: BenchScenarioSpec): string {
  const file = path.join(directory, benchScenarioName(spec));
  fs.writeFileSync(file, JSON.stringify(benchScenario(spec), null, 2) + '\n');
  return file;
}
