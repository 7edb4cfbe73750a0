'use strict';
/**
 * The simulated host that `gpu-validate.sh --simulate` validates against: builds the scenario
 * (see docs/scenarios.md) and replaces it atomically (write a new file, then rename it over the
 * old one; the simulator re-reads a renamed scenario).
 *
 * As a command: `node sim-scenario.cjs write-base PATH` writes the idle two-GPU host.
 */
const fs = require('node:fs');
const path = require('node:path');

const MIB = 1024 * 1024;

/** The idle host: two GPUs of the reference model, the second with a little unattributed memory. */
function baseScenario() {
  const device = (i, uuid, pciBusId, usedBytes) => ({
    name: 'NVIDIA RTX PRO 6000 Blackwell Server Edition',
    uuid,
    pciBusId,
    minorNumber: i,
    computeCapability: [12, 0],
    memory: { totalBytes: 97887 * MIB, reservedBytes: 480 * MIB, usedBytes },
    persistenceMode: true,
    computeMode: 'default',
    migMode: false,
    utilization: { gpu: 0, memory: 0 },
    temperatureC: 30 + i,
    powerWatts: 61.5,
    processes: [],
    migDevices: [],
  });
  return {
    system: { driverVersion: '580.95.05', nvmlVersion: '13.580.95.05', cudaDriverVersion: 13000 },
    devices: [
      device(0, 'GPU-6a1c27e0-5b0f-4d8e-9c43-0f2d7e1b8a01', '00000000:1B:00.0', 0),
      device(1, 'GPU-b24f9d13-7e6a-4c21-8f05-93d1c6a4e702', '00000000:9B:00.0', 312 * MIB + 4096),
    ],
  };
}

/**
 * A copy of `scenario` where GPU `gpu` additionally holds `heldBytes`, of which `processBytes`
 * are listed under process `pid` (omit pid to list no process: memory still draining).
 */
function withHeldMemory(scenario, gpu, heldBytes, pid, processBytes) {
  const copy = JSON.parse(JSON.stringify(scenario));
  const device = copy.devices[gpu];
  if (device === undefined) throw new Error(`no GPU ${gpu} in the simulated host`);
  device.memory.usedBytes += heldBytes;
  if (pid !== undefined) {
    device.processes.push({ pid, usedBytes: processBytes, kinds: ['compute'], name: 'gpu-validate-holder' });
  }
  return copy;
}

/** Writes `scenario` to `file` atomically: a temporary file in the same folder, then rename. */
function replaceScenario(file, scenario) {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`);
  fs.writeFileSync(tmp, JSON.stringify(scenario, null, 2) + '\n');
  fs.renameSync(tmp, file);
}

module.exports = { baseScenario, withHeldMemory, replaceScenario };

if (require.main === module) {
  const [command, file] = process.argv.slice(2);
  if (command !== 'write-base' || file === undefined) {
    process.stderr.write('usage: node sim-scenario.cjs write-base PATH\n');
    process.exit(64);
  }
  replaceScenario(file, baseScenario());
}
