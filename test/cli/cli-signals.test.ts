/**
 * Signals and the journal: SIGTERM / SIGINT / SIGHUP during a wait print the last state at error
 * priority and exit 143 / 130 / 129; SIGUSR1 never opens an inspector port; journald priority
 * prefixes appear only when JOURNAL_STREAM names the real stderr; the wrapper `wait -- CMD`
 * forwards SIGTERM to CMD and exits with its status, delivers a signal to CMD once even when it
 * was sent to the whole process group (a terminal's Ctrl-C, `kill -- -PGID` from a shell; as
 * PID 1, a group kill) or to every process of the unit's cgroup by its manager (systemd as PID 1,
 * also through a script `ExecStart=`; a user manager, not PID 1), and as PID 1 of a PID namespace
 * reaps orphans.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { cgroupUnavailable, makeCgroup } from '../helpers/cgroups';
import { cliEnv, cliPath, journalStreamOf, runCli, startCli } from '../helpers/cli';
import { listeningTcp, socketInodes } from '../helpers/listening-sockets';
import { simDevice, writeScenario } from '../helpers/sim';

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
  it.each([['SIGTERM', 143], ['SIGINT', 130], ['SIGHUP', 129]] as const)('%s: prints the last state at error priority and exits %d', async (signal, code) => {
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
    await cli.waitFor(/<6>event=waiting gpu=0 /);
    cli.child.kill(signal);
    const run = await cli.done;
    expect(run.code).toBe(code);
    expect(run.stderr).toMatch(new RegExp(`^<3>event=interrupted gpu=0 .*used=50GiB used_bytes=${50 * GiB} .*holders=${pid}/sleep/active`, 'm'));
    expect(run.stderr).toMatch(new RegExp(`^<3>event=failed result=interrupted reason="interrupted by ${signal} after [^"]+" exit=${code} exit_name=${signal}$`, 'm'));
    expect(run.stderr).not.toMatch(/^<3>event=interrupted gpu=1 /m);
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
    expect(lines[0]).toMatch(/^<6>event=waiting gpu=0 .*used=20GiB/);
    expect(lines.at(-1)).toMatch(/^<5>event=ready gpus=0 /);
    for (const line of lines) expect(line).toMatch(/^<[3-7]>(event|msg)=/);
  });

  it('are written at <3> for a failure', async () => {
    const stderrFile = join(work, 'stderr-failure');
    await startCli(['--version'], { stderrFile }).done;
    const pid = startHolder();
    const run = await runCli(['check'], { env: cliEnv(busyScenario(pid), { JOURNAL_STREAM: journalStreamOf(stderrFile) }), stderrFile });
    expect(run.code).toBe(75);
    expect(run.stderr).toMatch(/^<3>event=busy gpu=0 /m);
    expect(run.stderr).toMatch(/^<3>event=failed result=busy reason="GPUs not free: GPU 0 /m);
  });

  it('are not written when JOURNAL_STREAM names another file (inherited by a child)', async () => {
    const stderrFile = join(work, 'stderr-other');
    const other = join(work, 'other');
    await startCli(['--version'], { stderrFile: other }).done;
    const pid = startHolder();
    const run = await runCli(['check'], { env: cliEnv(busyScenario(pid), { JOURNAL_STREAM: journalStreamOf(other) }), stderrFile });
    expect(run.code).toBe(75);
    expect(run.stderr).toMatch(/^event=busy gpu=0 /m);
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
    await cli.waitFor(/<6>event=waiting gpu=0 /);
    await new Promise((resolve) => setTimeout(resolve, 800));
    const sentAt = performance.now();
    cli.child.kill('SIGTERM');
    const run = await cli.done;
    expect(run.code).toBe(143);
    expect(performance.now() - sentAt).toBeLessThan(10_000);
    expect(run.stderr).toMatch(/^<3>event=interrupted gpu=0 .*used=50GiB/m);
    expect(run.stderr).toMatch(/^<3>event=failed result=interrupted reason="interrupted by SIGTERM after /m);
  });
});

describe('SIGUSR1 to a waiting gpugate', () => {
  it('opens no inspector and no port, and the wait goes on', async () => {
    const pid = startHolder();
    const cli = startCli(['wait', '--stable', '0s', '--timeout', '60s', '--interval', '100ms'], { env: cliEnv(busyScenario(pid)) });
    await cli.waitFor(/waiting gpu=0 /);
    const gatePid = cli.child.pid!;
    cli.child.kill('SIGUSR1');
    // Node's inspector, when triggered, listens within milliseconds.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const own = socketInodes(gatePid);
    const listening = listeningTcp(gatePid);
    expect(listening.filter((socket) => own.has(socket.inode))).toEqual([]);
    expect(listening.filter((socket) => socket.port === 9229)).toEqual([]);
    expect(cli.child.exitCode).toBeNull();
    cli.child.kill('SIGTERM');
    const run = await cli.done;
    expect(run.code).toBe(143);
    expect(run.stderr).not.toMatch(/Debugger listening|inspector/i);
  });
});

/**
 * A CMD (python3: its handler runs once per delivery, where a shell's trap can merge two) that
 * prints `counting-5` (a text its command line does not contain), counts the `signal`s it
 * receives, and half a second after the first prints `count=N` and exits 0.
 */
function countingCommand(signal: 'INT' | 'TERM'): string[] {
  const program = [
    'import signal, time',
    'n = [0]',
    `signal.signal(signal.SIG${signal}, lambda *_: n.__setitem__(0, n[0] + 1))`,
    "print('counting-%d' % 5, flush=True)",
    'while n[0] == 0:',
    '    time.sleep(0.02)',
    'time.sleep(0.5)',
    "print('count=%d' % n[0], flush=True)",
  ].join('\n');
  return ['python3', '-c', program];
}

/**
 * `launch` + `wait --stable 0s -- <counting CMD>` in a process group of its own (its leader: the
 * first process of `launch`), with its output collected; `counting` resolves once CMD counts.
 */
function startInOwnGroup(launch: readonly string[]): { child: ChildProcess; out(): string; err(): string; counting: Promise<void>; closed: Promise<void> } {
  const [program, ...leading] = launch;
  const child = spawn(program!, [...leading, 'wait', '--stable', '0s', '--', ...countingCommand('TERM')], {
    env: cliEnv(idle),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  children.push(child);
  let out = '';
  let err = '';
  let counted: () => void = () => {};
  const counting = new Promise<void>((resolve) => (counted = resolve));
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
    if (out.includes('counting-5')) counted();
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  void closed.then(() => counted());
  return { child, out: () => out, err: () => err, counting, closed };
}

describe('gpugate wait -- CMD: a signal to the whole process group reaches CMD once', () => {
  it("a terminal's Ctrl-C (SIGINT to the foreground group) reaches gpugate alone, CMD having a session of its own, and is forwarded once", () => {
    // python3 gives gpugate a real terminal: its own session, the pty's foreground group.
    const driver = [
      'import os, pty, sys, time',
      'pid, fd = pty.fork()',
      'if pid == 0:',
      '    os.execv(sys.argv[1], sys.argv[1:])',
      'out = b""',
      'deadline = time.time() + 30',
      'while b"counting-5" not in out and time.time() < deadline:',
      '    out += os.read(fd, 4096)',
      'os.write(fd, b"\\x03")',
      'while True:',
      '    try:',
      '        chunk = os.read(fd, 4096)',
      '    except OSError:',
      '        break',
      '    if not chunk:',
      '        break',
      '    out += chunk',
      '_, status = os.waitpid(pid, 0)',
      'sys.stdout.write(out.decode("utf8", "replace"))',
      'sys.stdout.write("\\nexit=%d\\n" % os.waitstatus_to_exitcode(status))',
    ].join('\n');
    const run = spawnSync('python3', ['-c', driver, process.execPath, cliPath(), 'wait', '--stable', '0s', '--', ...countingCommand('INT')], {
      env: cliEnv(idle),
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.stdout).toMatch(/count=1\b/);
    expect(run.stdout).not.toMatch(/not-forwarded/);
    expect(run.stdout).toMatch(/exit=0\b/);
  });

  it('`kill -- -PGID` from a shell (not PID 1) reaches CMD once: CMD is not in that group, gpugate forwards it', async () => {
    const gate = startInOwnGroup([process.execPath, cliPath()]);
    await gate.counting;
    // The group gpugate leads, as a shell's job or a service's main process does; the sender is a shell.
    const sent = spawnSync('bash', ['-c', `kill -TERM -- -${gate.child.pid!}`], { encoding: 'utf8' });
    expect(sent.status, sent.stderr).toBe(0);
    await gate.closed;
    expect(gate.out()).toMatch(/count=1\b/);
    expect(gate.err()).not.toMatch(/not-forwarded/);
  });
});

/** Why a PID namespace cannot be made here (needs root and util-linux unshare), or null. */
function pidNamespaceUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'needs root for unshare --pid';
  const probe = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true'], { stdio: 'ignore' });
  return probe.status === 0 ? null : 'unshare --pid --fork --mount-proc is not available';
}
const noPidNamespace = pidNamespaceUnavailable();

describe.skipIf(noPidNamespace !== null)(`gpugate wait -- CMD as PID 1 of a PID namespace${noPidNamespace === null ? '' : ` (skipped: ${noPidNamespace})`}`, () => {
  const ZOMBIES_OF_PID1 = `awk '{ s = $0; sub(/^.*\\) /, "", s); split(s, f, " "); if (f[1] == "Z" && f[2] == 1) n++ } END { print "zombies=" n + 0 }' /proc/[0-9]*/stat`;

  it('reaps an orphaned grandchild of CMD once it exits (no zombie stays)', () => {
    // The grandchild is orphaned at once (its shell exits) and exits 0.2 s later.
    const script = `sh -c 'sleep 0.2 & exit 0'; sleep 1.5; ${ZOMBIES_OF_PID1}`;
    const run = spawnSync('unshare', ['--pid', '--fork', '--mount-proc', process.execPath, cliPath(), 'wait', '--stable', '0s', '--', 'bash', '-c', script], {
      env: cliEnv(idle),
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^zombies=0$/m);
  });

  it('a SIGTERM to its whole process group reaches CMD once', async () => {
    const gate = startInOwnGroup(['unshare', '--pid', '--fork', '--mount-proc', process.execPath, cliPath()]);
    await gate.counting;
    expect(gate.out()).toContain('counting-5');
    // unshare and gpugate (PID 1 inside) share this new process group; kill it as a whole.
    process.kill(-gate.child.pid!, 'SIGTERM');
    await gate.closed;
    expect(gate.out()).toMatch(/count=1\b/);
  });
});

const namedUnavailable = cgroupUnavailable('named');

describe.skipIf(noPidNamespace !== null || namedUnavailable !== null)(`gpugate wait -- CMD as a service's main process, stopped by its manager${noPidNamespace ?? namedUnavailable ?? '' ? ` (skipped: ${noPidNamespace ?? namedUnavailable})` : ''}`, () => {
  const cleanups: Array<() => void> = [];
  afterEach(() => {
    for (const cleanup of cleanups.splice(0).reverse()) cleanup();
  });

  /** How the stand-in manager runs the unit. */
  interface ManagerSetUp {
    killMode: 'control-group' | 'mixed';
    /** `ExecStart=` is a script that runs gpugate without `exec`: a shell is the unit's main process. */
    viaShell?: boolean;
    /** A user manager: not PID 1 (no PID namespace), it names itself in $MANAGERPID, the unit sits under user@0.service. */
    user?: boolean;
  }

  /**
   * A stand-in for the service manager, as PID 1 of a PID namespace (so its signals carry
   * si_pid 1, as systemd's do), or for a user manager (any other pid, named by $MANAGERPID): it
   * starts gpugate in a real `.service` cgroup and, once CMD runs, stops the unit as systemd
   * does for `killMode`: SIGTERM to the main process, then, for control-group, to every other
   * process of the cgroup, one by one as cgroup.procs lists them. The only part not real is
   * `systemctl show`, answered by a script on PATH with `killMode` (and recording its arguments).
   */
  function stopAsManager({ killMode, viaShell = false, user = false }: ManagerSetUp): { stdout: string; stderr: string; asked: string; unit: string } {
    const name = `gpugate-wrapper-${process.pid}-${Date.now()}.service`;
    const unit = user ? makeCgroup('named', `/user.slice/user-0.slice/user@0.service/app.slice/${name}`, cleanups) : makeCgroup('named', `/system.slice/${name}`, cleanups);
    const bin = mkdtempSync(join(tmpdir(), 'gpugate-systemctl-'));
    cleanups.push(() => rmSync(bin, { recursive: true, force: true }));
    const asked = join(bin, 'asked');
    writeFileSync(join(bin, 'systemctl'), `#!/bin/sh\necho "$*" >> '${asked}'\necho ${killMode}\n`, { mode: 0o755 });
    const manager = [
      'import os, sys, time',
      'procs, kill_mode = sys.argv[1], sys.argv[2]',
      'r, w = os.pipe()',
      'main = os.fork()',
      'if main == 0:',
      '    open(procs, "w").write(str(os.getpid()))',
      '    os.dup2(w, 1)',
      '    os.execve(sys.argv[3], sys.argv[3:], dict(os.environ, MANAGERPID=str(os.getppid())))',
      'os.close(w)',
      'out = b""',
      'while b"counting-5" not in out:',
      '    chunk = os.read(r, 4096)',
      '    if not chunk:',
      '        sys.exit("the task ended before CMD counted: " + out.decode())',
      '    out += chunk',
      'time.sleep(0.3)  # a unit is stopped a while after it started, not within its first milliseconds',
      'os.kill(main, 15)',
      'if kill_mode == "control-group":',
      '    for pid in open(procs).read().split():',
      '        if int(pid) != main:',
      '            try:',
      '                os.kill(int(pid), 15)',
      '            except ProcessLookupError:  # exited since cgroup.procs was read, as systemd allows',
      '                pass',
      'while True:',
      '    chunk = os.read(r, 4096)',
      '    if not chunk:',
      '        break',
      '    out += chunk',
      'os.waitpid(main, 0)',
      'sys.stdout.write(out.decode())',
    ].join('\n');
    const gate = [process.execPath, cliPath(), 'wait', '--stable', '0s', '--', ...countingCommand('TERM')];
    // `"$@"; :` keeps the shell from replacing itself with gpugate (its last command otherwise).
    const started = viaShell ? ['/bin/sh', '-c', '"$@"; :', 'sh', ...gate] : gate;
    const managerCommand = ['python3', '-c', manager, unit.procs, killMode, ...started];
    const [program, ...args] = user ? managerCommand : ['unshare', '--pid', '--fork', '--mount-proc', ...managerCommand];
    const run = spawnSync(program!, args, {
      env: cliEnv(idle, { PATH: `${bin}:${process.env['PATH'] ?? '/usr/bin:/bin'}` }),
      encoding: 'utf8',
      timeout: 30_000,
    });
    return { stdout: run.stdout, stderr: run.stderr, asked: existsSync(asked) ? readFileSync(asked, 'utf8') : '', unit: name };
  }

  it('KillMode=control-group (systemd signals CMD itself): gpugate does not forward, CMD gets SIGTERM once', () => {
    const { stdout, stderr, asked, unit } = stopAsManager({ killMode: 'control-group' });
    expect(stdout).toMatch(/count=1\b/);
    expect(stderr).toMatch(/event=not-forwarded signal=SIGTERM reason="sent by systemd to every process of .*KillMode=control-group/);
    expect(asked.trim()).toBe(`show --property=KillMode --value ${unit}`);
  });

  it('KillMode=mixed (systemd signals only gpugate): gpugate forwards, CMD gets SIGTERM once', () => {
    const { stdout, stderr, asked } = stopAsManager({ killMode: 'mixed' });
    expect(stdout).toMatch(/count=1\b/);
    expect(stderr).not.toMatch(/not-forwarded/);
    expect(asked).toContain('KillMode');
  });

  it('KillMode=control-group with a script ExecStart= that runs gpugate without exec (its parent is a shell, not PID 1): CMD gets SIGTERM once', () => {
    const { stdout, stderr, asked, unit } = stopAsManager({ killMode: 'control-group', viaShell: true });
    expect(stdout).toMatch(/count=1\b/);
    expect(stderr).toMatch(/event=not-forwarded signal=SIGTERM reason="sent by systemd to every process of .*KillMode=control-group/);
    expect(asked.trim()).toBe(`show --property=KillMode --value ${unit}`);
  });

  it('a user manager (not PID 1) signalling every process of a user unit\'s cgroup, one by one: CMD gets SIGTERM once', () => {
    const { stdout, stderr, asked, unit } = stopAsManager({ killMode: 'control-group', user: true });
    expect(stdout).toMatch(/count=1\b/);
    expect(stderr).toMatch(/event=not-forwarded signal=SIGTERM reason="sent by the user manager \(pid \d+\) to every process of .*KillMode=control-group/);
    expect(asked.trim()).toBe(`--user show --property=KillMode --value ${unit}`);
  });

  it('a user manager with KillMode=mixed (signals only the main process): gpugate forwards, CMD gets SIGTERM once', () => {
    const { stdout, stderr, asked } = stopAsManager({ killMode: 'mixed', user: true });
    expect(stdout).toMatch(/count=1\b/);
    expect(stderr).not.toMatch(/not-forwarded/);
    expect(asked).toContain('--user show');
  });
});

describe.skipIf(namedUnavailable !== null)(`gpugate wait -- CMD as a Slurm task, signalled by its step daemon${namedUnavailable === null ? '' : ` (skipped: ${namedUnavailable})`}`, () => {
  const cleanups: Array<() => void> = [];
  afterEach(() => {
    for (const cleanup of cleanups.splice(0).reverse()) cleanup();
  });

  /**
   * A stand-in for Slurm's step daemon (a python3 run through a link named `slurmstepd`, so its
   * comm is that name; not PID 1): it starts gpugate as a task, in its own process group and in a
   * real step cgroup, with SLURM_JOB_ID set, and once CMD runs signals the step as `proctrack`
   * does: every process of the cgroup one by one (proctrack/cgroup), or the task's process group
   * (proctrack/pgid). `scontrol show config` is a script on PATH naming `proctrack`.
   */
  function signalAsStepDaemon(proctrack: 'proctrack/cgroup' | 'proctrack/pgid', when: 'answered' | 'asking' | 'hung' = 'answered'): { stdout: string; stderr: string } {
    const step = makeCgroup('named', `/gpugate-test-slurm-${process.pid}-${Date.now()}/job_1/step_0`, cleanups);
    // Whatever of the step is still running when the test ends (a stand-in that timed out leaves
    // gpugate and CMD behind: they are in sessions of their own) is killed before the cgroup goes.
    cleanups.push(() => {
      for (const pid of readFileSync(step.procs, 'utf8').split('\n').filter((line) => line !== '')) {
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch {
          // exited meanwhile
        }
      }
    });
    const bin = mkdtempSync(join(tmpdir(), 'gpugate-slurm-'));
    cleanups.push(() => rmSync(bin, { recursive: true, force: true }));
    // It leaves a mark once it has answered (or, 'asking', once it has started, and then answers
    // only once the step daemon has signalled and left a mark of its own, or after 30 s; or,
    // 'hung', once it has started, and never answers): the step daemon below signals only after
    // that mark, and unless 'asking' only after scontrol has exited too ('hung': killed at
    // gpugate's time limit for the question).
    const answered = join(bin, 'scontrol-answered');
    const signalled = join(bin, 'stepd-signalled');
    const script = {
      answered: `#!/bin/sh\necho "ProctrackType           = ${proctrack}"\n: > '${answered}'\n`,
      asking: `#!/bin/sh\n: > '${answered}'\nn=0\nwhile [ ! -e '${signalled}' ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n + 1)); done\necho "ProctrackType           = ${proctrack}"\n`,
      hung: `#!/bin/sh\n: > '${answered}'\nwhile :; do sleep 0.05; done\n`,
    }[when];
    writeFileSync(join(bin, 'scontrol'), script, { mode: 0o755 });
    // The interpreter itself, not a wrapper script on PATH (a version manager's shim).
    const python = spawnSync('python3', ['-c', 'import os, sys; print(os.path.realpath(sys.executable))'], { encoding: 'utf8' }).stdout.trim();
    symlinkSync(python, join(bin, 'slurmstepd'));
    const stepd = [
      'import os, sys, time',
      'procs, proctrack = sys.argv[1], sys.argv[2]',
      'r, w = os.pipe()',
      'task = os.fork()',
      'if task == 0:',
      '    os.setpgid(0, 0)',
      '    open(procs, "w").write(str(os.getpid()))',
      '    os.dup2(w, 1)',
      '    os.execve(sys.argv[3], sys.argv[3:], dict(os.environ, SLURM_JOB_ID="1", SLURM_STEP_ID="0"))',
      'os.close(w)',
      'out = b""',
      'while b"counting-5" not in out:',
      '    chunk = os.read(r, 4096)',
      '    if not chunk:',
      '        sys.exit("the task ended before CMD counted: " + out.decode())',
      '    out += chunk',
      'def comm(pid):',
      '    try:',
      '        return open("/proc/%s/comm" % pid).read().strip()',
      '    except OSError:',
      '        return None',
      `while not os.path.exists(${JSON.stringify(answered)}) or any(comm(pid) == "scontrol" for pid in open(procs).read().split()) != ${when === 'asking' ? 'True' : 'False'}:`,
      '    time.sleep(0.01)',
      ...(when === 'hung' ? ['sys.stdout.write("scontrol gone before the signal\\n")'] : []),
      'if proctrack == "proctrack/cgroup":',
      '    for pid in open(procs).read().split():',
      '        try:',
      '            os.kill(int(pid), 15)',
      '        except ProcessLookupError:  # exited since cgroup.procs was read (a `sleep` of scontrol\'s loop), as slurmstepd allows',
      '            pass',
      'else:',
      '    os.killpg(task, 15)',
      `open(${JSON.stringify(signalled)}, "w").close()`,
      'while True:',
      '    chunk = os.read(r, 4096)',
      '    if not chunk:',
      '        break',
      '    out += chunk',
      'os.waitpid(task, 0)',
      'sys.stdout.write(out.decode())',
    ].join('\n');
    const run = spawnSync(join(bin, 'slurmstepd'), ['-c', stepd, step.procs, proctrack, process.execPath, cliPath(), 'wait', '--stable', '0s', '--', ...countingCommand('TERM')], {
      env: cliEnv(idle, { PATH: `${bin}:${process.env['PATH'] ?? '/usr/bin:/bin'}` }),
      encoding: 'utf8',
      timeout: 30_000,
    });
    return { stdout: run.stdout, stderr: run.stderr };
  }

  it('proctrack/cgroup (the step daemon signals every process of the step, CMD included): not forwarded, CMD gets SIGTERM once', () => {
    const { stdout, stderr } = signalAsStepDaemon('proctrack/cgroup');
    expect(stdout).toMatch(/count=1\b/);
    expect(stderr).toMatch(/event=not-forwarded signal=SIGTERM reason="sent by Slurm's step daemon \(pid \d+\) to every process of the step \(ProctrackType=proctrack\/cgroup\)/);
  });

  it('proctrack/pgid (the step daemon signals the task\'s process group, which CMD is not in): forwarded, CMD gets SIGTERM once', () => {
    const { stdout, stderr } = signalAsStepDaemon('proctrack/pgid');
    expect(stdout).toMatch(/count=1\b/);
    expect(stderr).not.toMatch(/not-forwarded/);
  });

  // The step daemon may signal while gpugate's start-up question is still running.
  it('proctrack/cgroup while scontrol is still answering: the signal that ends the question also reached CMD, not forwarded, CMD gets SIGTERM once', () => {
    const { stdout, stderr } = signalAsStepDaemon('proctrack/cgroup', 'asking');
    expect(stdout).toMatch(/count=1\b/);
    expect(stderr).toMatch(/event=not-forwarded signal=SIGTERM reason="sent by Slurm's step daemon \(pid \d+\) to every process, its `scontrol show config` question \(in a session of its own\) and CMD included"/);
  });

  it('proctrack/pgid while scontrol is still answering: the group signal does not reach the question (a session of its own), which answers; forwarded, CMD gets SIGTERM once', () => {
    const { stdout, stderr } = signalAsStepDaemon('proctrack/pgid', 'asking');
    expect(stdout).toMatch(/count=1\b/);
    expect(stderr).not.toMatch(/not-forwarded/);
  });

  // gpugate's time limit for the question (5 s) kills an scontrol that does not answer; the
  // manager's kill mode is then unknown, and an unknown sender's signal is forwarded (docs/cli.md:
  // a signal CMD never gets is worse than one it gets twice), so under proctrack/cgroup CMD gets
  // it from the step daemon and from gpugate.
  it('proctrack/cgroup with an scontrol that never answers: killed at gpugate\'s time limit, gone before the signal; the signal is forwarded as from an unknown sender', () => {
    const { stdout, stderr } = signalAsStepDaemon('proctrack/cgroup', 'hung');
    expect(stdout).toMatch(/count=2\b/);
    expect(stderr).not.toMatch(/not-forwarded/);
    expect(stdout).toContain('scontrol gone before the signal');
  });
});
