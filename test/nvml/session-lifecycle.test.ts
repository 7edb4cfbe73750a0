import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { NvmlError } from '../../src/nvml/nvml-error';
import { openNvml } from '../../src/nvml/session';
import { bundledScenario, freshSimulator, repoRoot, tempDir, useScenario } from '../helpers/session-helpers';

const addonPath = path.join(repoRoot, 'build', 'Release', 'gpugate.node');

function hangingMemoryScenario(fromCall: number) {
  const scenario = bundledScenario('idle-8x-rtx-pro-6000.json');
  scenario['faults'] = [{ function: 'nvmlDeviceGetMemoryInfo_v2', hang: true, fromCall }];
  return scenario;
}

describe('session lifecycle', () => {
  it('closes, rejects afterwards, and opens again on the same library', async () => {
    useScenario(bundledScenario('idle-8x-rtx-pro-6000.json'));
    const lib = freshSimulator();
    const first = await openNvml({ libraryPath: lib });
    expect((await first.snapshot()).devices).toHaveLength(8);
    await first.close();
    expect(first.closed).toBe(true);
    await expect(first.snapshot()).rejects.toMatchObject({ code: 'GPUGATE_SESSION_CLOSED' });
    expect(() => first.snapshotSync()).toThrow(NvmlError);
    expect(() => first.readMemorySync()).toThrow(/session is closed/);
    await first.close(); // idempotent
    const second = await openNvml({ libraryPath: lib });
    expect((await second.snapshot()).devices[7]?.uuid).toMatch(/^GPU-/);
    await second.close();
  });

  it('waits for pending snapshots before closing', async () => {
    useScenario(bundledScenario('idle-8x-rtx-pro-6000.json'));
    const s = await openNvml({ libraryPath: freshSimulator() });
    const pending = [s.snapshot({ processes: true }), s.snapshot(), s.snapshot({ devices: [1] })];
    await s.close();
    const results = await Promise.all(pending);
    expect(results.map((r) => r.devices.length)).toEqual([8, 8, 1]);
  });

  it('rejects a hung call at its deadline while the event loop keeps running, then stays poisoned', async () => {
    useScenario(hangingMemoryScenario(8)); // the first snapshot's 8 memory reads answer, the 9th hangs
    const s = await openNvml({ libraryPath: freshSimulator(), callTimeoutMs: 400 });
    await s.snapshot();
    let ticks = 0;
    const interval = setInterval(() => ticks++, 20);
    const started = Date.now();
    const error = await s.snapshot().then(
      () => undefined,
      (e: unknown) => e,
    );
    clearInterval(interval);
    expect(error).toBeInstanceOf(NvmlError);
    expect((error as NvmlError).code).toBe('GPUGATE_TIMEOUT');
    expect((error as NvmlError).message).toMatch(
      /snapshot did not answer within 400 ms: nvmlDeviceGetMemoryInfo_v2 on GPU 0 is stuck in the driver/,
    );
    expect((error as NvmlError).fn).toBe('nvmlDeviceGetMemoryInfo_v2');
    expect((error as NvmlError).device).toBe(0);
    expect(Date.now() - started).toBeGreaterThanOrEqual(390);
    expect(ticks).toBeGreaterThanOrEqual(5); // the timer kept firing while NVML was stuck
    expect(s.closed).toBe(true);
    // Later calls find the session closed (GPUGATE_SESSION_CLOSED, as documented); the timeout is their cause.
    await expect(s.snapshot()).rejects.toMatchObject({ code: 'GPUGATE_SESSION_CLOSED', message: /earlier NVML call missed its deadline/, cause: error });
    expect(() => s.snapshotSync()).toThrow(expect.objectContaining({ code: 'GPUGATE_SESSION_CLOSED', message: expect.stringMatching(/earlier NVML call missed its deadline/) }));
    await s.close(); // nothing to wait for: the stuck thread was abandoned
  });

  it('applies the deadline to open as well (hung nvmlInit)', async () => {
    const scenario = bundledScenario('idle-8x-rtx-pro-6000.json');
    scenario['faults'] = [{ function: 'nvmlInit_v2', hang: true }];
    useScenario(scenario);
    await expect(openNvml({ libraryPath: freshSimulator(), callTimeoutMs: 300 })).rejects.toMatchObject({
      code: 'GPUGATE_TIMEOUT',
      fn: 'nvmlInit_v2',
      device: null,
      message: /nvmlInit_v2 is stuck in the driver/,
    });
  });

  it('names the device whose attach hangs during open', async () => {
    const scenario = bundledScenario('idle-8x-rtx-pro-6000.json');
    scenario['faults'] = [{ function: 'nvmlDeviceGetUUID', device: 4, hang: true }];
    useScenario(scenario);
    await expect(openNvml({ libraryPath: freshSimulator(), callTimeoutMs: 300 })).rejects.toMatchObject({
      code: 'GPUGATE_TIMEOUT',
      fn: 'nvmlDeviceGetUUID',
      device: 4,
    });
  });

  it('keeps a process alive while its promises are pending, with no timer of its own', async () => {
    useScenario(bundledScenario('idle-8x-rtx-pro-6000.json'));
    const lib = freshSimulator();
    const script = `
      const b = require(${JSON.stringify(addonPath)});
      const h = b.createSession();
      b.open(h, ${JSON.stringify(lib)})
        .then(() => b.snapshot(h, true, false, null))
        .then((s) => { console.log('slots', s.numbers.length); return b.close(h); })
        .then(() => console.log('closed'));`;
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, ['-e', script], { timeout: 20_000 }, (error, out, err) =>
        error ? reject(new Error(`${error.message}\n${err}`)) : resolve(out),
      );
    });
    expect(stdout.trim().split('\n')).toEqual([expect.stringMatching(/^slots \d+$/), 'closed']);
  });

  it('settles pending work and shuts NVML down when a session handle is garbage-collected unclosed', async () => {
    // Each temperature read takes 40 ms, so the snapshot is still running when the handle is collected.
    const slow = bundledScenario('idle-8x-rtx-pro-6000.json');
    slow['faults'] = [{ function: 'nvmlDeviceGetTemperature', delayMs: 40 }];
    useScenario(slow);
    const lib = freshSimulator();
    const stats = path.join(tempDir(), 'gc-stats.json');
    const script = `
      const b = require(${JSON.stringify(addonPath)});
      (async () => {
        let h = b.createSession();
        await b.open(h, ${JSON.stringify(lib)});
        const pending = b.snapshot(h, true, false, null);
        h = null;
        global.gc();
        await new Promise((r) => setTimeout(r, 50));
        global.gc();
        const s = await pending;
        console.log('slots', s.numbers.length);
      })();`;
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile(
        process.execPath,
        ['--expose-gc', '-e', script],
        { timeout: 20_000, env: { ...process.env, GPUGATE_SIM_STATS: stats } },
        (error, out, err) => (error ? reject(new Error(`${error.message}\n${err}`)) : resolve(out)),
      );
    });
    expect(stdout.trim()).toMatch(/^slots \d+$/);
    const calls = (JSON.parse(fs.readFileSync(stats, 'utf8')) as { calls: Record<string, number> }).calls;
    expect(calls['nvmlInit_v2']).toBe(1);
    expect(calls['nvmlShutdown']).toBe(1);
  });

  it('lets a process exit although its NVML thread is stuck in a call', async () => {
    useScenario(hangingMemoryScenario(0));
    const lib = freshSimulator();
    // A plain Node process using the addon directly: open, start a snapshot that hangs forever,
    // give up after 200 ms like the TypeScript deadline does, and let the event loop drain.
    const script = `
      const b = require(${JSON.stringify(addonPath)});
      const h = b.createSession();
      b.open(h, ${JSON.stringify(lib)}).then(() => {
        b.snapshot(h, false, false, null).then(() => console.log('unexpected answer'));
        setTimeout(() => { b.abandon(h); console.log('abandoned'); }, 200);
      });`;
    const started = Date.now();
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, ['-e', script], { timeout: 20_000 }, (error, out, err) =>
        error ? reject(new Error(`${error.message}\n${err}`)) : resolve(out),
      );
    });
    expect(stdout.trim()).toBe('abandoned');
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it('works from worker_threads, and a worker that exits without close() shuts NVML down', async () => {
    useScenario(bundledScenario('idle-8x-rtx-pro-6000.json'));
    const code = `
      const { parentPort, workerData } = require('node:worker_threads');
      const b = require(workerData.addon);
      const h = b.createSession();
      b.open(h, workerData.lib).then(async (opened) => {
        const snap = await b.snapshot(h, true, false, null);
        parentPort.postMessage({ devices: opened.devices.length, uuid: opened.devices[3].uuid, slots: snap.numbers.length });
        if (workerData.close) await b.close(h);
        process.exit(0);
      }, (e) => { parentPort.postMessage({ error: e.message }); });`;
    const run = (lib: string, close: boolean) =>
      new Promise<{ devices: number; uuid: string; slots: number; exitCode: number }>((resolve, reject) => {
        const worker = new Worker(code, { eval: true, workerData: { addon: addonPath, lib, close } });
        let message: { devices: number; uuid: string; slots: number; error?: string } | undefined;
        worker.on('message', (m: typeof message) => (message = m));
        worker.on('error', reject);
        worker.on('exit', (exitCode) =>
          message?.error !== undefined || message === undefined
            ? reject(new Error(message?.error ?? 'worker sent nothing'))
            : resolve({ ...message, exitCode }),
        );
      });
    const expectedUuid = bundledScenario('idle-8x-rtx-pro-6000.json').devices[3]?.['uuid'];
    const closingLib = freshSimulator();
    const closed = await run(closingLib, true);
    // The simulator writes its call counts at the final nvmlShutdown of its instance: a worker
    // that never calls close() must still shut its instance down (environment cleanup hook).
    const leakingLib = freshSimulator();
    const stats = path.join(tempDir(), 'worker-stats.json');
    process.env['GPUGATE_SIM_STATS'] = stats;
    try {
      const leaked = await run(leakingLib, false);
      for (const result of [closed, leaked]) {
        expect(result).toMatchObject({ devices: 8, uuid: expectedUuid, exitCode: 0 });
        expect(result.slots).toBeGreaterThan(8 * 21);
      }
      const calls = (JSON.parse(fs.readFileSync(stats, 'utf8')) as { calls: Record<string, number> }).calls;
      expect(calls['nvmlInit_v2']).toBe(1);
      expect(calls['nvmlShutdown']).toBe(1);
    } finally {
      delete process.env['GPUGATE_SIM_STATS'];
    }
    // The main thread's own session still works after both workers' environments went away.
    const s = await openNvml({ libraryPath: closingLib });
    expect((await s.snapshot()).devices).toHaveLength(8);
    await s.close();
  });
});
