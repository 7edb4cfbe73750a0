import { spawn, spawnSync } from 'node:child_process';
import { closeSync, openSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { constants as osConstants } from 'node:os';
import { describe, expect, it } from 'vitest';
import { loadBinding } from '../src/nvml/binding';
import { nvmlCodeName } from '../src/nvml/nvml-error';
import { ENCODING, NATIVE_EXPORT_NAMES } from '../src/nvml/native-binding';
import { repoRoot, simDevice, writeScenario } from './helpers/sim';
import { makeTestTempDir } from './helpers/temp-root';
import { freshSimulator } from './session-helpers';

describe('the native export table matches the TypeScript NativeBinding interface', () => {
  const binding = loadBinding();

  it('exports exactly the names NativeBinding declares, each a function', () => {
    expect(Object.keys(binding).sort()).toEqual([...NATIVE_EXPORT_NAMES].sort());
    for (const name of NATIVE_EXPORT_NAMES) expect(typeof binding[name]).toBe('function');
  });

  it('encodes snapshots with the layout snapshot-decode.ts reads', () => {
    expect(binding.encodingLayout()).toEqual({
      version: ENCODING.version,
      headerSlots: ENCODING.headerSlots,
      deviceSlots: ENCODING.device.slots,
      migSlots: ENCODING.mig.slots,
      errorSlots: ENCODING.errorSlots,
      processSlots: ENCODING.processSlots,
      memorySlots: ENCODING.memorySlots,
    });
  });

  it('names every NVML return code the same way on both sides', () => {
    for (let code = -2; code <= 1000; code++) expect(binding.codeName(code)).toBe(nvmlCodeName(code));
    expect(nvmlCodeName(15)).toBe('NVML_ERROR_GPU_IS_LOST');
    expect(nvmlCodeName(31)).toBe('NVML_ERROR_31');
  });

  it('currentCall says where the NVML thread is and how long it has been in its task: what the deadline watchdog reads', async () => {
    process.env['GPUGATE_SIM_SCENARIO'] = writeScenario({
      devices: [simDevice(0), simDevice(1)],
      faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', device: 1, delayMs: 400 }],
    });
    const handle = binding.createSession();
    expect(binding.currentCall(handle)).toEqual({ fn: null, device: null, runningMs: null });
    await binding.open(handle, freshSimulator());
    expect(binding.currentCall(handle).runningMs).toBeNull(); // between tasks
    const pending = binding.snapshot(handle, false, true, null);
    await new Promise((resolve) => setTimeout(resolve, 150));
    const during = binding.currentCall(handle);
    expect(during).toMatchObject({ fn: 'nvmlDeviceGetMemoryInfo_v2', device: 1 });
    expect(during.runningMs).toBeGreaterThan(0);
    await pending;
    expect(binding.currentCall(handle).runningMs).toBeNull();
    await binding.close(handle);
  });

  it('health(handle, device) answers one entry per health query, each with its code, symbol and values, and checks its arguments', async () => {
    process.env['GPUGATE_SIM_SCENARIO'] = writeScenario({ devices: [simDevice(0)] });
    const handle = binding.createSession();
    await binding.open(handle, freshSimulator());
    expect(() => binding.health(handle, 1)).toThrow(RangeError);
    expect(() => binding.health(handle, '0' as unknown as number)).toThrow(/'device'/);
    const reading = await binding.health(handle, 0);
    expect(reading.index).toBe(0);
    expect(Object.keys(reading.fields).sort()).toEqual([
      'clockEventReasons', 'fabric', 'migMode', 'pcieGeneration', 'pcieMaxGeneration', 'pcieMaxWidth', 'pcieWidth',
      'remappedRows', 'retiredPagesPending', 'volatileUncorrectedEcc',
    ]);
    expect(reading.fields['remappedRows']).toEqual({
      nvmlReturn: 0, fn: 'nvmlDeviceGetRemappedRows', message: null, values: { correctable: 0, uncorrectable: 0, pending: 0, failureOccurred: 0 },
    });
    expect(reading.fields['fabric']).toMatchObject({ nvmlReturn: 3, fn: 'nvmlDeviceGetGpuFabricInfo', values: {} });
    await binding.close(handle);
  });

  it('searches the soname first, then the driver directories, never a CUDA stubs/ copy', () => {
    const candidates = binding.defaultLibraryCandidates();
    expect(candidates[0]).toBe('libnvidia-ml.so.1');
    expect(candidates).toContain('/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1');
    expect(candidates).toContain('/usr/lib64/libnvidia-ml.so.1');
    expect(candidates).toContain('/usr/local/nvidia/lib64/libnvidia-ml.so.1');
    expect(candidates).toContain('/usr/lib/wsl/lib/libnvidia-ml.so.1');
    expect(candidates).toContain('/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1');
    expect(candidates.every((c) => !c.includes('stubs') && c.endsWith('libnvidia-ml.so.1'))).toBe(true);
  });
});

describe('the process-control exports, on real processes', () => {
  const binding = loadBinding();

  it('pidfdOpen / pidfdSendSignal signal the process the descriptor was opened on; a gone one is ESRCH', async () => {
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)));
    const fd = binding.pidfdOpen(child.pid!);
    try {
      binding.pidfdSendSignal(fd, 0);
      binding.pidfdSendSignal(fd, osConstants.signals.SIGTERM);
      expect(await exited).toBe('SIGTERM');
      expect(() => binding.pidfdSendSignal(fd, 0)).toThrow(expect.objectContaining({ errno: osConstants.errno.ESRCH, syscall: 'pidfd_send_signal' }));
    } finally {
      closeSync(fd);
    }
    const gone = spawnSync('true').pid;
    expect(() => binding.pidfdOpen(gone)).toThrow(expect.objectContaining({ errno: osConstants.errno.ESRCH, syscall: 'pidfd_open' }));
  });

  it('rejects bad arguments with TypeErrors naming them, never crashing', () => {
    expect(() => binding.pidfdOpen(0)).toThrow(TypeError);
    expect(() => binding.pidfdOpen('1' as unknown as number)).toThrow(/'pid'/);
    expect(() => binding.pidfdSendSignal(-1, 0)).toThrow(/'fd'/);
    expect(() => binding.pidfdSendSignal(0, 65)).toThrow(/'signal'/);
    expect(() => binding.reapChild(1)).toThrow(/'pid'/);
    expect(() => binding.watchSignalSource(0)).toThrow(/'signal'/);
    expect(() => binding.lastSignalSource(1.5)).toThrow(/'signal'/);
  });

  it('reapChild leaves a process that is not its child alone; watchSignalSource records the sender of a signal', async () => {
    expect(binding.reapChild(process.ppid)).toBe(false);
    const signo = osConstants.signals.SIGUSR2;
    const received = new Promise<void>((resolve) => process.once('SIGUSR2', () => resolve()));
    expect(binding.watchSignalSource(signo)).toBe(true);
    process.kill(process.pid, 'SIGUSR2');
    await received;
    expect(binding.lastSignalSource(signo)).toEqual({ code: 0, pid: process.pid });
  });
});

describe('flockExclusive, against another process', () => {
  const binding = loadBinding();

  it('is refused while another process holds the lock and granted once the kernel drops it at that process\'s death', async () => {
    const dir = makeTestTempDir('gpugate-flock-');
    const file = join(dir, '.lock');
    // Another process takes the lock through the same export and sleeps holding it.
    const script = `const b = require('node-gyp-build')(${JSON.stringify(repoRoot())}); const fd = require('fs').openSync(${JSON.stringify(file)}, 'a'); if (!b.flockExclusive(fd)) process.exit(3); console.log('locked'); setTimeout(() => {}, 30000);`;
    const holder = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    const fd = openSync(file, 'a');
    try {
      await new Promise<void>((resolve) => holder.stdout!.once('data', () => resolve()));
      expect(binding.flockExclusive(fd)).toBe(false);
      const exited = new Promise<void>((resolve) => holder.once('exit', () => resolve()));
      holder.kill('SIGKILL');
      await exited;
      let granted = false;
      for (let tries = 0; tries < 200 && !granted; tries += 1) {
        granted = binding.flockExclusive(fd);
        if (!granted) await new Promise((resolve) => setTimeout(resolve, 10));
      }
      expect(granted).toBe(true);
      expect(binding.flockExclusive(fd)).toBe(true); // the same open file may take it again
    } finally {
      holder.kill('SIGKILL');
      closeSync(fd);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('rejects what is not a descriptor, and reports a closed one with errno', () => {
    expect(() => binding.flockExclusive(-1)).toThrow(/'fd'/);
    expect(() => binding.flockExclusive('3' as unknown as number)).toThrow(TypeError);
    expect(() => binding.flockExclusive(2_000_000)).toThrow(expect.objectContaining({ errno: osConstants.errno.EBADF, syscall: 'flock' }));
  });
});
