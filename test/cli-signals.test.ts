/**
 * Signals and the journal: SIGTERM / SIGINT during a wait print the last state at error
 * priority and exit 143 / 130; journald priority prefixes appear only when JOURNAL_STREAM names
 * the real stderr; the wrapper `wait -- CMD` forwards SIGTERM to CMD and exits with its status.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cliEnv, journalStreamOf, runCli, startCli } from './helpers/cli';
import { simDevice, writeScenario } from './helpers/sim';

const GiB = 1024 ** 3;
const work = mkdtempSync(join(tmpdir(), 'gpugate-cli-signals-'));
const children: ChildProcess[] = [];

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

function startHolder(): number {
  const child = spawn('sleep', ['60'], { stdio: 'ignore' });
  children.push(child);
  return child.pid as number;
}

/** GPU 0 held by a real process for good; GPU 1 idle. */
function busyScenario(pid: number): string {
  return writeScenario({
    devices: [
      simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 50 * GiB }, processes: [{ pid, usedBytes: 50 * GiB, kinds: ['compute'] }] }),
      simDevice(1),
    ],
  });
}

const idle = writeScenario({ devices: [simDevice(0), simDevice(1)] });

describe('signals during gpugate wait', () => {
  it.each([['SIGTERM', 143], ['SIGINT', 130]] as const)('%s: prints the last state at error priority and exits %d', async (signal, code) => {
    const pid = startHolder();
    const stderrFile = join(work, `stderr-${signal}`);
    // Create the file first so JOURNAL_STREAM can name its device and inode.
    rmSync(stderrFile, { force: true });
    const probe = startCli(['--version'], { stderrFile });
    await probe.done;
    const cli = startCli(['wait', '--stable', '0s', '--timeout', '60s', '--interval', '100ms'], {
      env: cliEnv(busyScenario(pid), { JOURNAL_STREAM: journalStreamOf(stderrFile) }),
      stderrFile,
    });
    await cli.waitFor(/<6>gpugate: waiting gpu=0 /);
    cli.child.kill(signal);
    const run = await cli.done;
    expect(run.code).toBe(code);
    expect(run.stderr).toMatch(new RegExp(`^<3>gpugate: interrupted gpu=0 .*used=50GiB .*holders=${pid}/sleep/active`, 'm'));
    expect(run.stderr).toMatch(new RegExp(`^<3>gpugate: interrupted by ${signal} after .*\\(exit ${code}/${signal}\\)$`, 'm'));
    expect(run.stderr).not.toMatch(/^<3>gpugate: interrupted gpu=1 /m);
  });
});

describe('journald priority prefixes', () => {
  it('are written when JOURNAL_STREAM names stderr: <6> progress, <5> success', async () => {
    const stderrFile = join(work, 'stderr-journal');
    await startCli(['--version'], { stderrFile }).done;
    const scenario = writeScenario({
      devices: [simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 20 * GiB } })],
      // Deterministic: memory frees after the 6th memory query, whatever the machine's speed.
      timeline: [{ atCall: 6, function: 'nvmlDeviceGetMemoryInfo_v2', device: 0, set: { memory: { usedBytes: 0 } } }],
    });
    const run = await runCli(['wait', '--stable', '300ms', '--interval', '100ms'], {
      env: cliEnv(scenario, { JOURNAL_STREAM: journalStreamOf(stderrFile) }),
      stderrFile,
    });
    expect(run.code).toBe(0);
    const lines = run.stderr.trim().split('\n');
    expect(lines[0]).toMatch(/^<6>gpugate: waiting gpu=0 .*used=20GiB/);
    expect(lines.at(-1)).toMatch(/^<5>gpugate: ready gpus=0 /);
    for (const line of lines) expect(line).toMatch(/^<[3-7]>gpugate: /);
  });

  it('are written at <3> for a failure', async () => {
    const stderrFile = join(work, 'stderr-failure');
    await startCli(['--version'], { stderrFile }).done;
    const pid = startHolder();
    const run = await runCli(['check'], { env: cliEnv(busyScenario(pid), { JOURNAL_STREAM: journalStreamOf(stderrFile) }), stderrFile });
    expect(run.code).toBe(75);
    expect(run.stderr).toMatch(/^<3>gpugate: busy gpu=0 /m);
    expect(run.stderr).toMatch(/^<3>gpugate: GPUs not free: GPU 0 /m);
  });

  it('are not written when JOURNAL_STREAM names another file (inherited by a child)', async () => {
    const stderrFile = join(work, 'stderr-other');
    const other = join(work, 'other');
    await startCli(['--version'], { stderrFile: other }).done;
    const pid = startHolder();
    const run = await runCli(['check'], { env: cliEnv(busyScenario(pid), { JOURNAL_STREAM: journalStreamOf(other) }), stderrFile });
    expect(run.code).toBe(75);
    expect(run.stderr).toMatch(/^gpugate: busy gpu=0 /m);
    expect(run.stderr).not.toMatch(/^</m);
  });

  it('are not written without JOURNAL_STREAM', async () => {
    const pid = startHolder();
    const run = await runCli(['check'], { env: cliEnv(busyScenario(pid)) });
    expect(run.code).toBe(75);
    expect(run.stderr).not.toMatch(/^</m);
  });
});

describe('gpugate wait -- CMD (the wrapper)', () => {
  it('runs CMD once the GPUs are free, forwards SIGTERM to it and exits with its status', async () => {
    const script = 'trap "echo got-TERM; exit 42" TERM; echo started; while :; do sleep 0.05; done';
    const cli = startCli(['wait', '--stable', '0s', '--', 'sh', '-c', script], { env: cliEnv(idle) });
    await cli.waitFor(/started/, 'stdout');
    cli.child.kill('SIGTERM');
    const run = await cli.done;
    expect(run.stdout).toContain('got-TERM');
    expect(run.code).toBe(42);
  });

  it('exits 128 + N when CMD dies by signal N', async () => {
    const run = await runCli(['wait', '--stable', '0s', '--', 'sh', '-c', 'kill -KILL $$'], { env: cliEnv(idle) });
    expect(run.code).toBe(137);
  });

  it("passes CMD's arguments and exit status through unchanged", async () => {
    const run = await runCli(['wait', '--stable', '0s', '--', 'sh', '-c', 'echo "$1"; exit 3', 'sh', '--json looks like a flag'], { env: cliEnv(idle) });
    expect(run.stdout.trim()).toBe('--json looks like a flag');
    expect(run.code).toBe(3);
  });

  it('does not run CMD when the GPUs stay busy (exit 75)', async () => {
    const pid = startHolder();
    const run = await runCli(['wait', '--timeout', '500ms', '--', 'sh', '-c', 'echo must-not-run'], { env: cliEnv(busyScenario(pid)) });
    expect(run.code).toBe(75);
    expect(run.stdout).not.toContain('must-not-run');
  });

  it('exits 127 when CMD does not exist', async () => {
    const run = await runCli(['wait', '--stable', '0s', '--', 'gpugate-no-such-command'], { env: cliEnv(idle) });
    expect(run.code).toBe(127);
    expect(run.stderr).toContain('command not found');
  });
});

describe('signals while an NVML call is stuck', () => {
  it('SIGTERM still ends the command promptly with 143 and the last state', async () => {
    const stderrFile = join(work, 'stderr-hung');
    await startCli(['--version'], { stderrFile }).done;
    const pid = startHolder();
    const scenario = writeScenario({
      devices: [simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 50 * GiB }, processes: [{ pid, usedBytes: 50 * GiB, kinds: ['compute'] }] })],
      // A few polls answer, then the driver never answers again (well inside the 30 s deadline).
      faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', hang: true, fromCall: 5 }],
    });
    const cli = startCli(['wait', '--interval', '100ms', '--nvml-timeout', '30s'], {
      env: cliEnv(scenario, { JOURNAL_STREAM: journalStreamOf(stderrFile) }),
      stderrFile,
    });
    await cli.waitFor(/<6>gpugate: waiting gpu=0 /);
    await new Promise((resolve) => setTimeout(resolve, 800));
    const sentAt = performance.now();
    cli.child.kill('SIGTERM');
    const run = await cli.done;
    expect(run.code).toBe(143);
    expect(performance.now() - sentAt).toBeLessThan(10_000);
    expect(run.stderr).toMatch(/^<3>gpugate: interrupted gpu=0 .*used=50GiB/m);
    expect(run.stderr).toMatch(/^<3>gpugate: interrupted by SIGTERM after /m);
  });
});
