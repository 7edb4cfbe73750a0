import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { openNvml } from '../../src/nvml/session';
import { bundledScenario, freshSimulator, GiB, repoRoot, tempDir, useScenario } from '../helpers/session-helpers';

// An unrelated NVML client (test/c/nvml_client.c: its own ABI declarations, plain dlopen) must
// read the same devices, memory and processes from the simulator as gpugate does.

interface ClientDump {
  count: number;
  driverVersion: string;
  devices: Array<{
    index: number;
    name: string;
    uuid: string;
    pciBusId: string;
    minorNumber: number;
    computeCapability: string;
    memory: { totalBytes: number; reservedBytes?: number; freeBytes: number; usedBytes: number };
    processes: Array<{ pid: number; usedBytes: number | null; gpuInstanceId?: number; computeInstanceId?: number }>;
  }>;
}

let client: string;
beforeAll(() => {
  client = path.join(tempDir(), 'nvml_client');
  execFileSync('cc', ['-O1', '-o', client, path.join(repoRoot, 'test', 'c', 'nvml_client.c'), '-ldl']);
});

function busyHost() {
  const scenario = bundledScenario('idle-8x-rtx-pro-6000.json');
  scenario.devices.forEach((device, i) => {
    device['memory'] = { totalBytes: 102641958912, reservedBytes: 493879296, usedBytes: (i + 1) * 3 * GiB };
    device['processes'] = Array.from({ length: i % 4 }, (_, k) => ({
      pid: 10_000 + i * 10 + k,
      usedBytes: k === 2 ? null : (i + 1) * GiB,
      kinds: ['compute'],
    }));
  });
  return scenario;
}

function dump(lib: string, scenarioFile: string, v1: boolean): ClientDump {
  const args = ['--lib', lib, ...(v1 ? ['--v1'] : []), 'dump'];
  const out = execFileSync(client, args, { env: { ...process.env, GPUGATE_SIM_SCENARIO: scenarioFile }, encoding: 'utf8' });
  return JSON.parse(out) as ClientDump;
}

describe('agreement with an independent NVML client', () => {
  for (const v1 of [false, true]) {
    it(`reads the same devices, memory and compute processes (${v1 ? 'plain v1 symbols, legacy build' : '_v2/_v3 symbols'})`, async () => {
      const host = busyHost();
      // The legacy build serves a driver that old (before R470: plain process lists and memory).
      if (v1) host['system'] = { driverVersion: '410.129', nvmlVersion: '10.410.129', cudaDriverVersion: 10000 };
      const file = useScenario(host);
      const lib = freshSimulator(v1 ? 'gpugate_sim_legacy' : 'gpugate_sim');
      const theirs = dump(lib, file, v1);
      const session = await openNvml({ libraryPath: lib });
      const ours = await session.snapshot({ processes: true });
      await session.close();

      expect(session.library.driverVersion).toBe(theirs.driverVersion);
      expect(ours.devices).toHaveLength(theirs.count);
      expect(theirs.count).toBe(8);
      for (const [i, device] of ours.devices.entries()) {
        const other = theirs.devices[i]!;
        expect(device.name).toBe(other.name);
        expect(device.uuid).toBe(other.uuid);
        expect(device.minorNumber).toBe(other.minorNumber);
        expect(device.computeCapability).toBe(other.computeCapability);
        if (!v1) expect(device.pciBusId).toBe(other.pciBusId);
        expect(device.memory?.totalBytes).toBe(other.memory.totalBytes);
        expect(device.memory?.freeBytes).toBe(other.memory.freeBytes);
        expect(device.memory?.usedBytes).toBe(other.memory.usedBytes);
        expect(device.memory?.reservedBytes).toBe(v1 ? null : other.memory.reservedBytes);
        const compute = (device.processes ?? []).filter((p) => p.kinds.includes('compute'));
        expect(compute.map((p) => ({ pid: p.pid, usedBytes: p.usedBytes }))).toEqual(
          other.processes.map((p) => ({ pid: p.pid, usedBytes: p.usedBytes })),
        );
        expect(compute.length).toBe(i % 4);
      }
    });
  }
});
