/**
 * `gpugate sim` from the built command: it starts a simulated host that third-party NVML
 * clients load through LD_LIBRARY_PATH (the independent C client, no --lib), binds "spawn"
 * processes to real, live, reparented processes whose pids the simulator lists, ends each when
 * the timeline drops it, picks the library of the scenario's driver profile, and removes
 * everything on SIGINT (exit 130).
 */
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEnv, startCli } from '../helpers/cli';
import { buildNvmlClient, runNvmlClient } from '../helpers/nvml-client';
import { isAlive, procPpid } from '../helpers/processes';
import { simDevice, writeScenario } from '../helpers/sim';
import { SimulatedHost } from '../../src/simulator/sim-host';
import { logText } from '../helpers/log-lines';

const GiB = 2 ** 30;
let client = '';
let remove = (): void => {};
beforeAll(async () => {
  ({ client, remove } = await buildNvmlClient());
});
afterAll(() => remove());

/** The variables from the printed `export` lines, as a shell would set them (no LD_LIBRARY_PATH before). */
function exportsOf(stdout: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const m of stdout.matchAll(/^export (\w+)='([^']*)'/gm)) env[m[1]!] = m[2]!;
  return env;
}

interface DumpDevice {
  processes?: Array<{ pid: number; usedBytes: number }>;
  memory?: { usedBytes: number };
}

async function dumpThroughLdLibraryPath(env: Record<string, string>): Promise<DumpDevice[]> {
  const base = { ...process.env };
  delete base['LD_LIBRARY_PATH'];
  const result = await runNvmlClient(client, ['dump'], { ...base, ...env });
  expect(result.stderr).toBe('');
  return (JSON.parse(result.stdout) as { devices: DumpDevice[] }).devices;
}

describe('gpugate sim', () => {
  it('runs a host whose spawned holders are live processes, ended when the timeline drops them, until SIGINT', async () => {
    const scenario = writeScenario({
      devices: [
        simDevice(0, { memory: { totalBytes: 80 * GiB, usedBytes: 30 * GiB }, processes: [{ spawn: { comm: 'VLLM::Worker_TP0' }, usedBytes: 30 * GiB }] }),
        simDevice(1, { memory: { totalBytes: 80 * GiB, usedBytes: 30 * GiB }, processes: [{ spawn: { comm: 'VLLM::Worker_TP1' }, usedBytes: 30 * GiB }] }),
      ],
      timeline: [{ atMs: 2500, device: 0, set: { processes: [], memory: { usedBytes: 0 } } }],
    });
    // A clock override in the environment must not move the host's own anchor.
    const sim = startCli(['sim', '--scenario', scenario], { env: cliEnv(null, { GPUGATE_SIM_STARTED_AT: 'init' }), killAfterMs: 60_000 });
    try {
      await sim.waitFor(/event=sim-running gpus=2 profile=current /);
      const env = exportsOf(sim.stdout());
      expect(Object.keys(env).sort()).toEqual(['GPUGATE_NVML_LIBRARY', 'GPUGATE_SIM_SCENARIO', 'LD_LIBRARY_PATH']);
      expect(sim.stdout().split('\n')[0]).toBe('unset GPUGATE_SIM_STARTED_AT');
      const folder = /^event=sim-running .* folder=(\S+) /m.exec(sim.stderr())![1]!;
      const devices = await dumpThroughLdLibraryPath(env);
      const pids = devices.map((d) => d.processes?.[0]?.pid ?? 0);
      for (const [i, pid] of pids.entries()) {
        expect(isAlive(pid)).toBe(true);
        expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0]).toBe(`VLLM::Worker_TP${i}`);
        expect(readFileSync(`/proc/${pid}/comm`, 'utf8').trim()).toBe('VLLM::Worker_T'.concat('P'));
        expect(procPpid(pid)).not.toBe(sim.child.pid);
      }
      // The timeline drops GPU 0's process at 2.5 s: its holder ends with it, GPU 1's lives on.
      await sim.waitFor(new RegExp(`event=holder-exited pid=${pids[0]} comm=VLLM::Worker_TP0 at_ms=2500`));
      expect(isAlive(pids[0]!)).toBe(false);
      expect(isAlive(pids[1]!)).toBe(true);
      const later = await dumpThroughLdLibraryPath(env);
      expect(later.map((d) => d.processes?.map((p) => p.pid) ?? [])).toEqual([[], [pids[1]]]);
      sim.child.kill('SIGINT');
      const run = await sim.done;
      expect(run.code).toBe(130);
      expect(isAlive(pids[1]!)).toBe(false);
      expect(existsSync(folder)).toBe(false);
    } finally {
      sim.child.kill('SIGKILL');
    }
  }, 60_000);

  it('links the library of the scenario driver profile: r535-stride reads as a 535.54 driver', async () => {
    const sim = startCli(['sim', '--scenario', 'scenarios/r535-stride.json'], { env: cliEnv(null), killAfterMs: 60_000 });
    try {
      await sim.waitFor(/event=sim-running gpus=\d+ profile=r535-early /);
      const env = exportsOf(sim.stdout());
      expect(env['GPUGATE_NVML_LIBRARY']).toMatch(/gpugate_sim_r535_early\.so$/);
      const base = { ...process.env };
      delete base['LD_LIBRARY_PATH'];
      const symbols = await runNvmlClient(client, ['symbols', 'nvmlDeviceGetConfComputeMemSizeInfo', 'nvmlDeviceGetRunningProcessDetailList'], { ...base, ...env });
      expect(symbols.stdout.trim().split('\n')).toEqual(['nvmlDeviceGetConfComputeMemSizeInfo present', 'nvmlDeviceGetRunningProcessDetailList absent']);
      sim.child.kill('SIGTERM');
      expect((await sim.done).code).toBe(143);
    } finally {
      sim.child.kill('SIGKILL');
    }
  }, 60_000);

  it('SIGHUP as soon as its folder exists, or once it runs: exit 129, its folder and holders gone', async () => {
    const temp = mkdtempSync(join(tmpdir(), 'gpugate-sim-signals-'));
    const folders = (): string[] => readdirSync(temp).filter((name) => name.startsWith('gpugate-simhost-'));
    try {
      for (const moment of ['folder', 'running'] as const) {
        const sim = startCli(['sim'], { env: cliEnv(null, { TMPDIR: temp }), killAfterMs: 60_000 });
        const pid = sim.child.pid as number;
        try {
          if (moment === 'folder') {
            for (let i = 0; folders().length === 0; i += 1) {
              if (i > 3000) throw new Error('the simulated host folder did not appear');
              await new Promise((resolve) => setTimeout(resolve, 5));
            }
          } else {
            await sim.waitFor(/event=sim-running /);
          }
          sim.child.kill('SIGHUP');
          const run = await sim.done;
          expect(run.code, `${moment}: ${run.stderr}`).toBe(129);
          expect(folders(), moment).toEqual([]);
          // Its holders are `tail --pid=PID`: none may outlive it.
          const holders = readdirSync('/proc').filter((entry) => /^\d+$/.test(entry) && (() => {
            try {
              return readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').includes(`--pid=${pid}`);
            } catch {
              return false;
            }
          })());
          expect(holders, moment).toEqual([]);
        } finally {
          sim.child.kill('SIGKILL');
        }
      }
    } finally {
      rmSync(temp, { recursive: true, force: true });
    }
  }, 60_000);

  it('rejects a scenario the simulator rejects, naming the file and position, and a bad --started-at', async () => {
    const bad = writeScenario({ devices: [simDevice(0, { memory: { totalBytes: 'big' } })] });
    const run = await startCli(['sim', '--scenario', bad], { env: cliEnv(null) }).done;
    expect(run.code).toBe(64);
    // stderr also holds the simulator library's own `gpugate-sim: …` line: gpugate's log is the rest.
    const log = logText(run.stderr.split('\n').filter((line) => !line.startsWith('gpugate-sim: ')).join('\n'));
    expect(log).toContain(`gpugate sim: the simulator rejected ${bad} (as written with startedAt and holder pids filled in): `);
    expect(log).toMatch(/gpugate-simhost-\w+\/scenario-[\w-]+\.json:\d+:\d+: expected a non-negative integer number of bytes for "totalBytes"\n/);
    const when = await startCli(['sim', '--started-at', 'soon'], { env: cliEnv(null) }).done;
    expect(when.code).toBe(64);
    expect(logText(when.stderr)).toContain('--started-at "soon": expected now, Unix milliseconds or an ISO 8601 UTC time');
  });

  it('keeps same-named holders distinct processes, one per entry of a GPU, and the same process across that GPU timeline', () => {
    const python = (): object => ({ spawn: { comm: 'python3' }, usedBytes: GiB });
    const host = SimulatedHost.start({
      scenario: {
        devices: [simDevice(0, { processes: [python(), python()] }), simDevice(1, { processes: [python()] })],
        timeline: [{ atMs: 3_600_000, device: 0, set: { processes: [python()] } }],
      },
      startedAt: Date.now(),
    });
    try {
      const written = JSON.parse(readFileSync(host.scenarioPath, 'utf8')) as {
        devices: Array<{ processes: Array<{ pid: number; name: string }> }>;
        timeline: Array<{ set: { processes: Array<{ pid: number }> } }>;
      };
      const [first, second] = written.devices[0]!.processes.map((p) => p.pid);
      const other = written.devices[1]!.processes[0]!.pid;
      expect(new Set([first, second, other]).size).toBe(3);
      expect(written.timeline[0]!.set.processes[0]!.pid).toBe(first);
      expect(host.holders.map((h) => h.pid).sort()).toEqual([first, second, other].sort());
      for (const pid of [first!, second!, other]) {
        expect(isAlive(pid)).toBe(true);
        expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0]).toBe('python3');
      }
      expect(written.devices[0]!.processes.map((p) => p.name)).toEqual(['python3', 'python3']);
    } finally {
      host.stop();
    }
    for (const holder of host.holders) expect(isAlive(holder.pid)).toBe(false);
  });
});
