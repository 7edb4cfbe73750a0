/**
 * `--no-processes` disregards the NVIDIA daemons (nvidia-persistenced, nv-hostengine,
 * dcgm-exporter) only when a holder is one: root, running an executable of the daemon's name.
 * The attack: any user renames a process with prctl(PR_SET_NAME) to `nv-hostengine`, holds a
 * GPU, and `gpugate check --no-processes --max-used 1GiB` (the documented Slurm prolog) passed
 * it as free. Real processes, listed by the simulator by pid: renamed by uid 65534 (setpriv) and
 * by root, an executable named like the daemon run by uid 65534, and genuine stand-ins (copies
 * of `sleep` under the daemons' names, run by root), which are still disregarded.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { cliEnv, parseJsonOutput, runCli, type CliRun } from '../helpers/cli';
import { isAlive, until } from '../helpers/processes';
import { simDevice, writeScenario } from '../helpers/sim';

const MiB = 2 ** 20;
const GiB = 2 ** 30;
const NOBODY = 65534;
/** Debian's python3 (ctypes reaches prctl through libc). */
const PYTHON = '/usr/bin/python3';
const PR_SET_NAME = 15;
const RENAMED = `import ctypes, sys, time\nif ctypes.CDLL(None).prctl(${PR_SET_NAME}, sys.argv[1].encode(), 0, 0, 0) != 0:\n    sys.exit("prctl failed")\nprint("ready", flush=True)\ntime.sleep(120)\n`;

function whyNot(): string | null {
  if (process.getuid?.() !== 0) return 'needs root to start processes as root and as another uid';
  if (spawnSync('setpriv', ['--version']).status !== 0) return 'setpriv (util-linux) is not installed';
  if (spawnSync(PYTHON, ['-c', 'import ctypes'], { stdio: 'ignore' }).status !== 0) return `${PYTHON} with ctypes is not installed`;
  return null;
}
const skip = whyNot();

const children: ChildProcess[] = [];
// Executables a uid 65534 process runs must lie where that uid can reach them: not under the
// test run's private folder.
const binaries = skip === null ? mkdtempSync(path.join(tmpdir(), 'gpugate-daemons-')) : '';

afterEach(async () => {
  const pids = children.splice(0).map((child) => child.pid!);
  for (const pid of pids) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
  await until('the holders to exit', () => pids.every((pid) => !isAlive(pid)));
});

afterAll(() => {
  if (binaries !== '') rmSync(binaries, { recursive: true, force: true });
});

/** Starts `argv` (as uid 65534 when `asNobody`), and resolves with its pid once it printed a line or its comm is `comm`. */
async function holder(argv: string[], comm: string, asNobody: boolean): Promise<number> {
  const command = asNobody ? ['setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--', ...argv] : argv;
  const child = spawn(command[0]!, command.slice(1), { stdio: 'ignore', cwd: '/' });
  child.on('error', () => {});
  children.push(child);
  const pid = child.pid!;
  await until(`holder ${pid} to be named ${comm}`, () => {
    try {
      return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === comm && !readlinkSync(`/proc/${pid}/exe`).endsWith('/setpriv');
    } catch {
      return false;
    }
  });
  return pid;
}

/** A process that renamed itself `name` with prctl(PR_SET_NAME): its executable stays python3. */
function renamedTo(name: string, asNobody: boolean): Promise<number> {
  return holder([PYTHON, '-c', RENAMED, name], name, asNobody);
}

/** A process running a copy of `sleep` named `name` (its comm: the name cut to 15 bytes). */
function runningAs(name: string, asNobody: boolean): Promise<number> {
  const binary = path.join(binaries, name);
  copyFileSync('/bin/sleep', binary);
  chmodSync(binary, 0o755);
  chmodSync(binaries, 0o755);
  return holder([binary, '120'], name.slice(0, 15), asNobody);
}

/** `gpugate check --no-processes --max-used 1GiB --json` with GPU 0 listing `pids` (256 MiB each, under the 1 GiB bound together). */
async function prolog(pids: number[], extra: string[] = []): Promise<CliRun> {
  const scenario = writeScenario({
    devices: [simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: pids.length * 256 * MiB }, processes: pids.map((pid) => ({ pid, usedBytes: 256 * MiB })) })],
  });
  return runCli(['check', '--no-processes', '--max-used', '1GiB', '--json', ...extra], { env: cliEnv(scenario) });
}

interface GpuJson { ok: boolean; reasons: string[]; holders: Array<{ pid: number; reason: string }> }

function gpuOf(run: CliRun): GpuJson {
  return (parseJsonOutput(run)['gpus'] as GpuJson[])[0]!;
}

describe.skipIf(skip !== null)(`ignored daemons are proven by identity${skip === null ? '' : ` (skipped: ${skip})`}`, () => {
  it('a process uid 65534 renamed nv-hostengine with prctl holds the GPU: the prolog reports it busy (exit 75)', async () => {
    const impostor = await renamedTo('nv-hostengine', true);
    expect(readlinkSync(`/proc/${impostor}/exe`)).toMatch(/python3/);
    for (const extra of [[], ['--stale', 'ignore']]) {
      const run = await prolog([impostor], extra);
      expect(run.code, `${extra.join(' ')}\n${run.stderr}`).toBe(75);
      const gpu = gpuOf(run);
      expect(gpu.reasons).toEqual(['processes']);
      expect(gpu.holders).toContainEqual(expect.objectContaining({ pid: impostor, reason: expect.stringMatching(/named nv-hostengine but not the nv-hostengine daemon \(it runs as uid 65534, not root\): counted as a holder/) }));
    }
  });

  it('root renaming python3 to dcgm-exporter is no daemon either: its executable says so', async () => {
    const impostor = await renamedTo('dcgm-exporter', false);
    const run = await prolog([impostor]);
    expect(run.code, run.stderr).toBe(75);
    expect(gpuOf(run).holders).toContainEqual(expect.objectContaining({ pid: impostor, reason: expect.stringMatching(/not the dcgm-exporter daemon \(its executable is \/.*python3[^)]*\)/) }));
  });

  it('an executable named nv-hostengine run by uid 65534 is counted: a daemon runs as root', async () => {
    const impostor = await runningAs('nv-hostengine', true);
    const run = await prolog([impostor]);
    expect(run.code, run.stderr).toBe(75);
    expect(gpuOf(run).holders).toContainEqual(expect.objectContaining({ pid: impostor, reason: expect.stringMatching(/it runs as uid 65534, not root/) }));
  });

  it('the genuine daemons (root, executables of their names; nvidia-persistenced shows a cut comm) are disregarded: exit 0', async () => {
    const daemons = [await runningAs('nv-hostengine', false), await runningAs('dcgm-exporter', false), await runningAs('nvidia-persistenced', false)];
    const run = await prolog(daemons);
    expect(run.code, run.stderr).toBe(0);
    expect(gpuOf(run)).toMatchObject({ ok: true, reasons: [], holders: [] });
    // With the daemons beside a renamed impostor, only the impostor is counted.
    const impostor = await renamedTo('nv-hostengine', true);
    const mixed = await prolog([...daemons, impostor]);
    expect(mixed.code, mixed.stderr).toBe(75);
    expect(gpuOf(mixed).holders.map((h) => h.pid)).toEqual([impostor]);
  });
});
