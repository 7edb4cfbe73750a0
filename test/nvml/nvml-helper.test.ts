/**
 * The NVML helper process (issue 24): every session runs NVML in `gpugate-nvml-helper`, spawned
 * once per session beside the addon, holding only its channel; its command line says what it is
 * doing; a missed deadline abandons it (killed, reaped later, reported with its pid and state); a
 * crash of it is a typed rejection and the program goes on. Real processes throughout: the real
 * addon and helper against the simulator, real signals, /proc read as it is.
 */
import { copyFileSync, chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config-error';
import { GpugateError } from '../../src/gpugate-error';
import { NvmlError } from '../../src/nvml/nvml-error';
import { openNvml } from '../../src/nvml/session';
import { packageEntryLiteral, runNodeScript } from '../helpers/node-script';
import { procState } from '../helpers/processes';
import { simDevice } from '../helpers/sim';
import { closeTrackedSessions, trackSession } from '../helpers/tracked-sessions';
import { rejectionOf as caught } from '../helpers/thrown-by';
import { freshSimulator, repoRoot, useScenario } from '../helpers/session-helpers';
import { exeOf, HELPER_FILE, helperChildren, newHelper, untilDefined as until } from '../helpers/helper-children';

const IN_CALL = /^gpugate-nvml-helper in (\S+) gpu (\d+|-) since (\d+)$/;

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  await closeTrackedSessions({ ignoreFailures: true });
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  delete process.env['GPUGATE_SIM_SCENARIO'];
});

function commandLine(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1');
  } catch {
    return null;
  }
}

async function gone(pid: number): Promise<void> {
  await until(() => (exeOf(pid) === null && commandLine(pid) === null ? true : undefined), `helper ${pid} to be reaped`);
}

describe('the NVML helper process', () => {
  it('is spawned once per session (not per call), beside the addon, and ends with the session', async () => {
    useScenario({ devices: [simDevice(0), simDevice(1)] });
    const before = helperChildren();
    const session = trackSession(await openNvml({ libraryPath: freshSimulator() }));
    const helper = await newHelper(before);
    for (let poll = 0; poll < 20; poll++) {
      await session.snapshot({ memoryOnly: true });
      session.snapshotSync({ processes: true });
      session.readMemorySync();
    }
    await session.health(1);
    expect(helperChildren().filter((pid) => !before.includes(pid))).toEqual([helper]);
    expect(exeOf(helper)).toBe(HELPER_FILE);
    await session.close();
    await gone(helper);
    expect(helperChildren().filter((pid) => !before.includes(pid))).toEqual([]);
  });

  it('inherits only its channel (a pipe each way: requests on fd 3, replies on fd 4) and /dev/null on 0-2, with no blocked or ignored signals', async () => {
    useScenario({ devices: [simDevice(0)] });
    const before = helperChildren();
    trackSession(await openNvml({ libraryPath: freshSimulator() }));
    const helper = await newHelper(before);
    const fds = readdirSync(`/proc/${helper}/fd`).sort();
    expect(fds).toEqual(['0', '1', '2', '3', '4']);
    for (const fd of ['0', '1', '2']) expect(readlinkSync(`/proc/${helper}/fd/${fd}`)).toBe('/dev/null');
    const requests = readlinkSync(`/proc/${helper}/fd/3`);
    const replies = readlinkSync(`/proc/${helper}/fd/4`);
    expect(requests).toMatch(/^pipe:\[\d+\]$/);
    expect(replies).toMatch(/^pipe:\[\d+\]$/);
    expect(replies).not.toBe(requests);
    // The access mode in fdinfo's octal flags: 0 read-only, 1 write-only.
    const accessMode = (fd: number) => Number.parseInt(/^flags:\s+([0-7]+)$/m.exec(readFileSync(`/proc/${helper}/fdinfo/${fd}`, 'utf8'))?.[1] ?? 'x', 8) & 3;
    expect([accessMode(3), accessMode(4)]).toEqual([0, 1]);
    const status = readFileSync(`/proc/${helper}/status`, 'utf8');
    expect(status).toMatch(/^SigBlk:\s+0+$/m);
    expect(status).toMatch(/^SigIgn:\s+0+$/m);
    // Its own process group: a terminal's ^C goes to gpugate, which decides.
    const stat = readFileSync(`/proc/${helper}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    expect(Number(fields[2])).toBe(helper); // pgrp
    expect(Number(fields[1])).toBe(process.pid); // ppid
  });

  it('shows `idle` between requests and the NVML call, GPU and start time while one runs', async () => {
    useScenario({ devices: [simDevice(0), simDevice(1)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', device: 1, delayMs: 1500 }] });
    const before = helperChildren();
    const session = trackSession(await openNvml({ libraryPath: freshSimulator() }));
    const helper = await newHelper(before);
    expect(commandLine(helper)).toBe('gpugate-nvml-helper idle\0');
    const askedAt = Date.now();
    const pending = session.snapshot({ memoryOnly: true });
    const during = await until(() => {
      const line = commandLine(helper);
      return line !== null && line.startsWith('gpugate-nvml-helper in nvmlDeviceGetMemoryInfo_v2 gpu 1') ? line : undefined;
    }, 'the helper to show the delayed call');
    expect(during.endsWith('\0')).toBe(true);
    const match = IN_CALL.exec(during.slice(0, -1));
    expect(match?.slice(1, 3)).toEqual(['nvmlDeviceGetMemoryInfo_v2', '1']);
    const since = Number(match?.[3]);
    expect(since).toBeGreaterThanOrEqual(askedAt - 1); // CLOCK_REALTIME ms; Date.now() is truncated to ms too
    expect(since).toBeLessThanOrEqual(Date.now());
    // ps shows the same line (it reads the same /proc file).
    await pending;
    expect(commandLine(helper)).toBe('gpugate-nvml-helper idle\0');
  });

  it('a hung call: GPUGATE_TIMEOUT naming the function, the GPU and the helper, which is killed and reaped', async () => {
    useScenario({ devices: [simDevice(0), simDevice(1)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', device: 1, hang: true }] });
    const before = helperChildren();
    const session = await openNvml({ libraryPath: freshSimulator(), callTimeoutMs: 300 });
    const helper = await newHelper(before);
    const error = await caught(() => session.snapshot({ memoryOnly: true }));
    expect(error).toBeInstanceOf(NvmlError);
    expect(error).toMatchObject({ code: 'GPUGATE_TIMEOUT', fn: 'nvmlDeviceGetMemoryInfo_v2', device: 1, helperPid: helper });
    expect((error as Error).message).toContain('nvmlDeviceGetMemoryInfo_v2 on GPU 1 is stuck in the driver');
    expect((error as Error).message).toMatch(new RegExp(`NVML helper process \\(pid ${helper}, state S`));
    expect(session.closed).toBe(true);
    await gone(helper);
    await session.close(); // already closed: resolves
  });

  it('a hung blocking call (readMemorySync) ends at the deadline too, with the helper named', async () => {
    useScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', hang: true }] });
    const before = helperChildren();
    const session = await openNvml({ libraryPath: freshSimulator(), callTimeoutMs: 300 });
    const helper = await newHelper(before);
    const error = await caught(() => session.readMemorySync());
    expect(error).toMatchObject({ code: 'GPUGATE_TIMEOUT', fn: 'nvmlDeviceGetMemoryInfo_v2', device: 0, helperPid: helper });
    await gone(helper);
  });

  it('a helper killed by SIGSEGV mid-call: GPUGATE_NVML_HELPER_CRASHED naming the signal; the program opens a new session', async () => {
    useScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', delayMs: 10_000 }] });
    const before = helperChildren();
    const session = trackSession(await openNvml({ libraryPath: freshSimulator() }));
    const helper = await newHelper(before);
    const pending = caught(() => session.snapshot({ memoryOnly: true }));
    const queued = caught(() => session.snapshot({ memoryOnly: true }));
    await until(() => (IN_CALL.test(commandLine(helper)?.slice(0, -1) ?? '') ? true : undefined), 'the helper to be in the call');
    process.kill(helper, 'SIGSEGV');
    const error = await pending;
    expect(error).toBeInstanceOf(NvmlError);
    expect(error).toBeInstanceOf(GpugateError);
    expect(error).toMatchObject({ code: 'GPUGATE_NVML_HELPER_CRASHED' });
    expect((error as Error).message).toMatch(new RegExp(`NVML helper process \\(pid ${helper}\\) was killed by SIGSEGV while answering snapshot`));
    expect(await queued).toMatchObject({ code: 'GPUGATE_SESSION_CLOSED', cause: error });
    expect(session.closed).toBe(true);
    expect(await caught(() => session.snapshot())).toMatchObject({ code: 'GPUGATE_SESSION_CLOSED' });
    await gone(helper);

    useScenario({ devices: [simDevice(0)] });
    const again = trackSession(await openNvml({ libraryPath: freshSimulator() }));
    expect((await again.snapshot({ memoryOnly: true })).devices).toHaveLength(1);
  });

  it('a program whose call hangs gets the typed rejection and exits by itself, leaving no helper behind', async () => {
    const scenario = useScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', hang: true }] });
    // No close(), no process.exit(): the program must end on its own once the rejection is handled.
    const script = `
      const { openNvml } = require(${packageEntryLiteral()});
      openNvml({ libraryPath: ${JSON.stringify(freshSimulator())}, callTimeoutMs: 300 })
        .then((session) => session.snapshot({ memoryOnly: true }))
        .then(() => console.log('answered'), (error) => console.log(JSON.stringify({ name: error.name, code: error.code, helperPid: error.helperPid })));`;
    const run = await runNodeScript(script, { ...process.env, GPUGATE_SIM_SCENARIO: scenario }, 30_000);
    expect({ code: run.code, signal: run.signal }, run.stderr).toEqual({ code: 0, signal: null });
    const outcome = JSON.parse(run.stdout.trim()) as { name: string; code: string; helperPid: number };
    expect(outcome).toMatchObject({ name: 'NvmlError', code: 'GPUGATE_TIMEOUT' });
    expect(outcome.helperPid).toBeGreaterThan(0);
    // Killed at the deadline; its parent is gone, so init reaps it.
    await gone(outcome.helperPid);
  });

  it('a helper that died while idle: the next call is GPUGATE_NVML_HELPER_CRASHED, and writing to its pipe raises no SIGPIPE in the program', async () => {
    // A program that listens for SIGPIPE (so the signal is not ignored, as Node's default has
    // it) must not get one from the addon's write to the dead helper's request pipe.
    const scenario = useScenario({ devices: [simDevice(0)] });
    const outcome = async (listen: boolean) => {
      const script = `
        const fs = require('node:fs');
        const { openNvml } = require(${packageEntryLiteral()});
        let pipeSignals = 0;
        if (${listen}) process.on('SIGPIPE', () => { pipeSignals++; });
        const helperOf = () => fs.readdirSync('/proc/self/task')
          .flatMap((task) => fs.readFileSync('/proc/self/task/' + task + '/children', 'utf8').split(' ').filter(Boolean).map(Number))
          .find((pid) => { try { return fs.readlinkSync('/proc/' + pid + '/exe') === ${JSON.stringify(HELPER_FILE)}; } catch { return false; } });
        const state = (pid) => { const stat = fs.readFileSync('/proc/' + pid + '/stat', 'utf8'); return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3); };
        const turn = () => new Promise((resolve) => setImmediate(resolve));
        (async () => {
          const session = await openNvml({ libraryPath: ${JSON.stringify(freshSimulator())} });
          await session.snapshot({ memoryOnly: true });
          const helper = helperOf();
          process.kill(helper, 'SIGKILL');
          while (state(helper) !== 'Z') await turn();
          const errors = [];
          for (const call of [() => session.snapshot({ memoryOnly: true }), () => session.snapshotSync({ memoryOnly: true })]) {
            try { await call(); errors.push('answered'); } catch (error) { errors.push(error.code + ': ' + error.message); }
          }
          for (let i = 0; i < 3; i++) await turn(); // a signal would be dispatched by now
          await new Promise((resolve) => setTimeout(resolve, 50));
          console.log(JSON.stringify({ helper, errors, pipeSignals }));
        })();`;
      const run = await runNodeScript(script, { ...process.env, GPUGATE_SIM_SCENARIO: scenario }, 30_000);
      expect({ code: run.code, signal: run.signal }, run.stderr).toEqual({ code: 0, signal: null });
      return JSON.parse(run.stdout.trim()) as { helper: number; errors: string[]; pipeSignals: number };
    };
    for (const listen of [true, false]) {
      const { helper, errors, pipeSignals } = await outcome(listen);
      expect(errors[0]).toMatch(new RegExp(`^GPUGATE_NVML_HELPER_CRASHED: .*NVML helper process \\(pid ${helper}\\) was killed by SIGKILL`));
      expect(errors[1]).toMatch(/^GPUGATE_SESSION_CLOSED: /);
      expect(pipeSignals).toBe(0);
    }
  });

  it('reads a reply larger than one first read (16 GPUs with 8 processes each) whole, on the direct path and the blocking one', async () => {
    const busy = Array.from({ length: 8 }, (_, i) => ({ pid: 3000 + i, usedBytes: 2 ** 30, kinds: ['compute'], name: `worker-${i}` }));
    useScenario({ devices: Array.from({ length: 16 }, (_, i) => simDevice(i, { processes: busy.map((p) => ({ ...p, pid: p.pid + 100 * i })) })) });
    const session = trackSession(await openNvml({ libraryPath: freshSimulator() }));
    for (const snapshot of [await session.snapshot({ processes: true }), session.snapshotSync({ processes: true })]) {
      expect(snapshot.devices).toHaveLength(16);
      expect(snapshot.devices.map((device) => device.processes?.length)).toEqual(Array(16).fill(8));
      expect(snapshot.devices[15]?.processes?.[7]?.pid).toBe(3000 + 7 + 1500);
    }
  });

  it('takes a request split across writes, and stops, answering nothing, at bytes after a request (a broken peer)', async () => {
    // The helper started by hand, as the addon starts it but on stream sockets this test holds
    // (Node has no plain pipes to give a child): requests in on fd 3, replies out on fd 4.
    const startHelper = () => {
      const child = spawn(HELPER_FILE, ['idle', String(process.pid), ' '.repeat(160)], { stdio: ['ignore', 'ignore', 'ignore', 'pipe', 'pipe'] });
      // Our own child, not yet reaped while Node holds its handle: a failed assertion leaves no helper behind.
      cleanups.push(() => child.kill('SIGKILL'));
      const channel = child.stdio[3] as Duplex;
      const received: Buffer[] = [];
      (child.stdio[4] as Duplex).on('data', (chunk: Buffer) => received.push(chunk));
      const ended = new Promise<{ code: number | null; bytes: Buffer }>((resolve) =>
        child.on('close', (code) => resolve({ code, bytes: Buffer.concat(received) })),
      );
      return { pid: child.pid as number, channel, ended };
    };
    const SHUTDOWN = 5;
    const header = (length: number) => Buffer.from(new Uint32Array([length]).buffer);
    // The header, then the request once the helper sleeps again (so it has taken the header and
    // waits for the rest): answered (a 1-byte "done" reply), then it ends.
    const split = startHelper();
    await new Promise((resolve) => split.channel.write(header(1), resolve));
    await until(() => (procState(split.pid) === 'S' ? true : undefined), 'the helper to wait for the rest of its request');
    split.channel.write(Buffer.from([SHUTDOWN]));
    expect(await split.ended).toEqual({ code: 0, bytes: Buffer.concat([header(1), Buffer.from([0])]) });
    // The same request with one byte more in the same write: nothing is answered.
    const broken = startHelper();
    broken.channel.write(Buffer.concat([header(1), Buffer.from([SHUTDOWN, 0xff])]));
    expect(await broken.ended).toEqual({ code: 0, bytes: Buffer.alloc(0) });
  });

  it("nvmlProcess 'in-process' runs NVML on a thread of this process: no helper is spawned", async () => {
    useScenario({ devices: [simDevice(0), simDevice(1)] });
    const before = helperChildren();
    const session = trackSession(await openNvml({ libraryPath: freshSimulator(), nvmlProcess: 'in-process' }));
    expect((await session.snapshot({ processes: true })).devices).toHaveLength(2);
    expect(session.readMemorySync()).toHaveLength(2 * (session.readMemorySync().length / 2));
    expect(helperChildren().filter((pid) => !before.includes(pid))).toEqual([]);
  });

  it('refuses an nvmlProcess value or key it does not know, naming it', async () => {
    expect(await caught(() => openNvml({ nvmlProcess: 'thread' as 'helper' }))).toBeInstanceOf(ConfigError);
    expect(String(await caught(() => openNvml({ nvmlProcess: 'thread' as 'helper' })))).toMatch(/'nvmlProcess' must be one of 'helper', 'in-process', got "thread"/);
    expect(String(await caught(() => openNvml({ nvmlprocess: 'helper' } as never)))).toMatch(/nvmlprocess/);
  });
});

describe('a helper file that cannot be run', () => {
  /** An addon copy in a scratch package root; the script opens a session with it and prints the outcome. */
  async function openWithAddonIn(prepare: (releaseDir: string) => void): Promise<{ name: string; code: string; message: string }> {
    const root = mkdtempSync(path.join(tmpdir(), 'gpugate-helper-'));
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    const release = path.join(root, 'build', 'Release');
    mkdirSync(release, { recursive: true });
    copyFileSync(path.join(repoRoot, 'build', 'Release', 'gpugate.node'), path.join(release, 'gpugate.node'));
    prepare(release);
    const scenario = useScenario({ devices: [simDevice(0)] });
    const script = `
      const { openNvml } = require(${packageEntryLiteral()});
      openNvml({ libraryPath: ${JSON.stringify(freshSimulator())} }).then(
        (session) => { console.log(JSON.stringify({ name: 'opened', code: '', message: '' })); return session.close(); },
        (error) => console.log(JSON.stringify({ name: error.name, code: error.code, message: error.message })));`;
    const run = await runNodeScript(script, { ...process.env, GPUGATE_PREBUILD: root, GPUGATE_SIM_SCENARIO: scenario });
    expect(run.code).toBe(0);
    return JSON.parse(run.stdout.trim()) as { name: string; code: string; message: string };
  }

  it('absent beside the addon: GPUGATE_NVML_HELPER_MISSING naming where it was looked for (never PATH)', async () => {
    const outcome = await openWithAddonIn(() => undefined);
    expect(outcome).toMatchObject({ name: 'NvmlError', code: 'GPUGATE_NVML_HELPER_MISSING' });
    expect(outcome.message).toMatch(/the NVML helper \/\S+\/build\/Release\/gpugate-nvml-helper is missing/);
  });

  it('writable by others, or a symbolic link: refused, not run', async () => {
    const writable = await openWithAddonIn((release) => {
      copyFileSync(HELPER_FILE, path.join(release, 'gpugate-nvml-helper'));
      chmodSync(path.join(release, 'gpugate-nvml-helper'), 0o757);
    });
    expect(writable).toMatchObject({ code: 'GPUGATE_NVML_HELPER_MISSING' });
    expect(writable.message).toMatch(/is writable by its group or by others; it is not run/);
    const linked = await openWithAddonIn((release) => {
      const { symlinkSync } = require('node:fs') as typeof import('node:fs');
      symlinkSync(HELPER_FILE, path.join(release, 'gpugate-nvml-helper'));
    });
    expect(linked).toMatchObject({ code: 'GPUGATE_NVML_HELPER_MISSING' });
    expect(linked.message).toMatch(/is not a regular file/);
  });

  it('a copy that is fine there runs', async () => {
    const outcome = await openWithAddonIn((release) => copyFileSync(HELPER_FILE, path.join(release, 'gpugate-nvml-helper')));
    expect(outcome.name).toBe('opened');
  });
});
