import { spawn, spawnSync } from 'node:child_process';
import { closeSync, openSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { constants as osConstants } from 'node:os';
import { describe, expect, it } from 'vitest';
import { loadBinding } from '../../src/nvml/binding';
import { nvmlCodeName } from '../../src/nvml/nvml-error';
import { NATIVE_EXPORT_NAMES } from '../../src/nvml/native-binding';
import { resolveWireLayout, WIRE_PROCESS_KINDS, WIRE_SLOT_NAMES } from '../../src/nvml/wire-layout';
import { repoRoot, simDevice, writeScenario } from '../helpers/sim';
import { makeTestTempDir } from '../helpers/temp-root';
import { freshSimulator } from '../helpers/session-helpers';

describe('the native export table matches the TypeScript NativeBinding interface', () => {
  const binding = loadBinding();

  it('exports exactly the names NativeBinding declares, each a function', () => {
    expect(Object.keys(binding).sort()).toEqual([...NATIVE_EXPORT_NAMES].sort());
    for (const name of NATIVE_EXPORT_NAMES) expect(typeof binding[name]).toBe('function');
  });

  it('names the slots of every record kind the decoder reads, each once; TypeScript reads every slot the addon writes', () => {
    const native = binding.encodingLayout();
    const kinds = [...Object.keys(WIRE_SLOT_NAMES), 'processKinds'].sort();
    expect(Object.keys(native).sort()).toEqual(kinds);
    for (const kind of Object.keys(WIRE_SLOT_NAMES) as Array<keyof typeof WIRE_SLOT_NAMES>) {
      const names = native[kind];
      expect(new Set(names).size, `${kind}: a name written twice`).toBe(names.length);
      // Same names, in any order: an unread slot is dead weight, a missing one a stale build.
      expect([...names].sort(), kind).toEqual([...WIRE_SLOT_NAMES[kind]].sort());
    }
    expect([...native.processKinds].sort()).toEqual([...WIRE_PROCESS_KINDS].sort());
  });

  it('resolves each slot to the position the addon gives its name, whatever the order', () => {
    const native = binding.encodingLayout();
    const layout = resolveWireLayout(native);
    for (const kind of Object.keys(WIRE_SLOT_NAMES) as Array<keyof typeof WIRE_SLOT_NAMES>) {
      const positions = layout[kind] as unknown as Record<string, number>;
      expect(positions['slots'], kind).toBe(native[kind].length);
      for (const name of WIRE_SLOT_NAMES[kind]) expect(positions[name], `${kind}.${name}`).toBe(native[kind].indexOf(name));
    }
    for (const kind of WIRE_PROCESS_KINDS) expect(layout.processKindBits[kind]).toBe(2 ** native.processKinds.indexOf(kind));
    // A native layout with its slots reordered (and one added) resolves by name, not by count.
    const moved = { ...native, device: ['addedLater', ...[...native.device].reverse()], memory: [...native.memory].reverse() };
    const resolved = resolveWireLayout(moved);
    expect(resolved.device.memFree).toBe(moved.device.indexOf('memFree'));
    expect(resolved.device.slots).toBe(native.device.length + 1);
    expect(resolved.memory.nvmlReturn).toBe(0);
  });

  it('refuses an addon whose layout lacks a slot the decoder reads, naming the record and the slot', () => {
    const native = binding.encodingLayout();
    const stale = { ...native, process: native.process.filter((name) => name !== 'kinds') };
    expect(() => resolveWireLayout(stale)).toThrow(/no slot 'kinds' in its process records.*npm run build:native/);
    const { mig: _mig, ...noMig } = native;
    expect(() => resolveWireLayout(noMig as typeof native)).toThrow(/has no mig record/);
  });

  it('the memory records readMemory writes decode to what the encoded snapshot says', async () => {
    process.env['GPUGATE_SIM_SCENARIO'] = writeScenario({
      devices: [simDevice(0), simDevice(1, { memory: { totalBytes: 97887 * 2 ** 20, reservedBytes: 471 * 2 ** 20, usedBytes: 7 * 2 ** 30 } })],
    });
    const handle = binding.createSession();
    const opened = await binding.open(handle, freshSimulator());
    const layout = resolveWireLayout(binding.encodingLayout());
    const out = new Float64Array(opened.devices.length * layout.memory.slots);
    expect(binding.readMemory(handle, out, 1000)).toBe(2);
    const encoded = binding.snapshotSync(handle, false, true, null, 1000);
    const D = layout.device;
    const M = layout.memory;
    expect(encoded.numbers[layout.header.deviceCount]).toBe(2);
    expect(encoded.numbers.length).toBe(layout.header.slots + 2 * D.slots); // no field errors, lists or MIG records
    for (let d = 0; d < 2; d++) {
      const device = layout.header.slots + d * D.slots;
      const memory = d * M.slots;
      expect(encoded.numbers[device + D.index]).toBe(d);
      expect(out[memory + M.nvmlReturn]).toBe(0);
      expect(out[memory + M.totalBytes]).toBe(encoded.numbers[device + D.memTotal]);
      expect(out[memory + M.freeBytes]).toBe(encoded.numbers[device + D.memFree]);
      expect(out[memory + M.usedBytes]).toBe(encoded.numbers[device + D.memUsed]);
      expect(out[memory + M.reservedBytes]).toBe(encoded.numbers[device + D.memReserved]);
    }
    expect(out[M.slots + M.usedBytes]).toBe(7 * 2 ** 30);
    await binding.close(handle);
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
