/**
 * `gpugate demo` from the built command: no GPU, no flags; it shows the orphaned engine worker
 * (classed orphan with no suspicion, and still named after vLLM once it is a zombie), the wait
 * explaining why in lines of at most 80 columns, succeeds once the simulated memory is free and
 * stable, ends with a summary (who held what, how long, how many polls) and the systemd lines,
 * colours its output only on a terminal (a real pty) without NO_COLOR, and leaves no process and
 * no temporary folder behind (also when interrupted).
 *
 * Each demo runs with a TMPDIR of its own, so that what it leaves there is its own alone; the two
 * terminal runs, which spend their time waiting on the simulated host's timeline, run side by side.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { cliEnv, cliPath, runCli, startCli } from '../helpers/cli';
import { repoRoot } from '../helpers/sim';
import { isAlive } from '../helpers/processes';

/** Folders made for the demo runs' TMPDIR, removed after the file. */
const ownTmpDirs: string[] = [];
afterAll(() => {
  for (const dir of ownTmpDirs) rmSync(dir, { recursive: true, force: true });
});

/** An empty folder for one demo run's TMPDIR. */
function ownTmpDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'gpugate-demo-test-'));
  ownTmpDirs.push(dir);
  return dir;
}

/** What a demo run left in its TMPDIR: its own folder (gpugate-demo-*) or the simulator's. */
function demoFolders(dir: string): string[] {
  return readdirSync(dir).filter((name) => name.startsWith('gpugate-demo-') || name.startsWith('gpugate-sim'));
}

// Colour codes (SGR sequences).
const ANSI = /\u001b\[[0-9;]*m/g;

function longLines(text: string): string[] {
  return text.replace(ANSI, '').split(/\r?\n/).filter((line) => line.length > 80);
}

/** Runs the demo on a real pseudo-terminal (python's pty module); resolves to what the terminal showed and what it left in its TMPDIR. */
function demoOnTerminal(extraEnv: NodeJS.ProcessEnv): Promise<{ status: number | null; screen: string; left: string[] }> {
  const tmp = ownTmpDir();
  const child = spawn('python3', ['-c', 'import os, pty, sys; sys.exit(os.waitstatus_to_exitcode(pty.spawn(sys.argv[1:])))', process.execPath, cliPath(), 'demo'],
    { env: cliEnv(null, { TERM: 'xterm-256color', TMPDIR: tmp, ...extraEnv }), stdio: ['ignore', 'pipe', 'inherit'] });
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  let screen = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => { screen += chunk; });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(killer);
      resolve({ status, screen: screen.replace(/\r\n/g, '\n'), left: demoFolders(tmp) });
    });
  });
}

function workerPid(stdout: string): number {
  const match = /pid (\d+) "VLLM::Worker_TP6"/.exec(stdout);
  if (match === null) throw new Error(`the demo did not name its worker:\n${stdout}`);
  return Number(match[1]);
}

describe('gpugate demo', () => {
  it('replays the restart race and exits 0, leaving nothing behind', async () => {
    const tmp = ownTmpDir();
    const run = await runCli(['demo'], { env: cliEnv(null, { TMPDIR: tmp }), killAfterMs: 60_000 });
    expect(run.code).toBe(0);
    const pid = workerPid(run.stdout);
    expect(run.stderr).toMatch(new RegExp(`^gpugate: stale gpu=6 pid=${pid} class=orphan name=VLLM::Worker_TP6 `, 'm'));
    // Its own real orphan, correctly labelled: no "pid reuse?" suspicion on a host without driver nodes.
    expect(run.stderr).toContain('reason="engine worker reparented to 1: its launcher is gone"');
    expect(run.stderr).not.toContain('pid reuse');
    expect(run.stderr).toMatch(new RegExp(`^gpugate: waiting gpu=6 used=92GiB holders=${pid}/VLLM::Worker_TP6/orphan`, 'm'));
    expect(run.stderr).toMatch(/^gpugate: waiting gpu=\d .*holders=\d+\/\?\/gone/m);
    expect(run.stderr).toMatch(/why=unstable stable_for=/);
    // Once it is a zombie it keeps vLLM's name (its comm, cut to 15 characters as for vLLM's own workers).
    expect(run.stderr).not.toMatch(/sleep/);
    for (const match of run.stderr.matchAll(new RegExp(`holders=${pid}/([^/]+)/zombie`, 'g'))) expect(match[1]).toBe('VLLM::Worker_TP');
    const ready = /^gpugate: ready gpus=0,1,2,3,4,5,6,7 elapsed=(\S+) polls=(\d+)$/m.exec(run.stderr);
    expect(ready).not.toBeNull();
    // Every line fits an 80-column terminal, and a pipe gets no colour codes.
    expect(longLines(run.stdout)).toEqual([]);
    expect(longLines(run.stderr)).toEqual([]);
    expect(run.stdout + run.stderr).not.toMatch(ANSI);
    // The summary: who held what, how long the wait took and how many polls, what the unit needs.
    const summary = run.stdout.slice(run.stdout.indexOf('\nSummary\n'));
    expect(summary).toMatch(new RegExp(`pid ${pid} VLLM::Worker_TP6, a live orphan, until it exited at 2\\.5 s`));
    expect(summary).toContain('~92GiB on each of 8 GPUs');
    expect(summary).toContain(`Waited   ${ready?.[1] as string} and ${ready?.[2] as string} polls, until every GPU had 86GiB free`);
    expect(summary).toContain('exit 0: this is when systemd would start vLLM');
    // The unit lines are the shipped drop-in's settings (continued with a backslash where long).
    const unitLines = summary.replace(/ \\\n\s+/g, ' ');
    const settings = readFileSync(join(repoRoot(), 'contrib', 'systemd', 'gpugate-wait.conf'), 'utf8').split('\n').filter((l) => /^\w+=/.test(l) || /^\[/.test(l));
    expect(settings).toContain('[Service]');
    for (const line of settings) expect(unitLines).toContain(`\n  ${line}\n`);
    expect(unitLines).not.toContain('ExecStopPost=');
    expect(run.elapsedMs).toBeLessThan(50_000);
    expect(isAlive(pid)).toBe(false);
    expect(demoFolders(tmp)).toEqual([]);
  }, 70_000);

  it('colours its output on a terminal, not with NO_COLOR, and fits 80 columns there too', async () => {
    const [coloured, plain] = await Promise.all([demoOnTerminal({}), demoOnTerminal({ NO_COLOR: '1' })]);
    expect(coloured.status).toBe(0);
    expect(coloured.screen).toMatch(/\u001b\[[0-9;]*m/);
    expect(coloured.screen).toMatch(/\u001b\[[0-9;]*mgpugate:\u001b\[0m\u001b\[[0-9;]*m ready\u001b\[0m gpus=0,1,2,3,4,5,6,7/);
    expect(longLines(coloured.screen)).toEqual([]);
    expect(coloured.left).toEqual([]);
    expect(plain.status).toBe(0);
    expect(plain.screen).not.toMatch(ANSI);
    expect(plain.screen).toContain('Summary');
    expect(plain.left).toEqual([]);
  }, 70_000);

  it('cleans up its worker and folder when interrupted with SIGINT (exit 130)', async () => {
    const tmp = ownTmpDir();
    const demo = startCli(['demo'], { env: cliEnv(null, { TMPDIR: tmp }), killAfterMs: 60_000 });
    await demo.waitFor(/waiting gpu=6 /);
    const pid = workerPid(demo.stdout());
    expect(isAlive(pid)).toBe(true);
    demo.child.kill('SIGINT');
    const run = await demo.done;
    expect(run.code).toBe(130);
    expect(run.stderr).toMatch(/^gpugate: interrupted gpu=6 /m);
    expect(isAlive(pid)).toBe(false);
    expect(demoFolders(tmp)).toEqual([]);
  }, 70_000);
});

describe('gpugate demo interrupted at any moment', () => {

  /** Processes started for `ownerPid` (a holder is `tail --pid=OWNER`): none may outlive the demo. */
  function holdersOf(ownerPid: number): number[] {
    const found: number[] = [];
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').includes(`--pid=${ownerPid}`)) found.push(Number(entry));
      } catch {
        // gone meanwhile
      }
    }
    return found;
  }

  async function until(what: string, predicate: () => boolean): Promise<void> {
    for (let i = 0; !predicate(); i += 1) {
      if (i > 3000) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  const EXIT = { SIGHUP: 129, SIGINT: 130, SIGTERM: 143 } as const;

  it.each(['SIGHUP', 'SIGINT', 'SIGTERM'] as const)('%s as soon as its simulated host exists (before its wait): exit 128+N, no folder, no process left', async (signal) => {
    const temp = ownTmpDir();
    const demo = startCli(['demo'], { env: cliEnv(null, { TMPDIR: temp }), killAfterMs: 60_000 });
    const pid = demo.child.pid as number;
    await until('the demo folder', () => demoFolders(temp).length > 0);
    demo.child.kill(signal);
    const run = await demo.done;
    expect(run.code, run.stderr).toBe(EXIT[signal]);
    expect(demoFolders(temp)).toEqual([]);
    expect(holdersOf(pid)).toEqual([]);
  }, 70_000);

  it('SIGHUP right after it is spawned: it ends by that signal, leaving nothing', async () => {
    const temp = ownTmpDir();
    const demo = startCli(['demo'], { env: cliEnv(null, { TMPDIR: temp }), killAfterMs: 60_000 });
    const pid = demo.child.pid as number;
    demo.child.kill('SIGHUP');
    const run = await demo.done;
    // Before Node has installed any handler the kernel ends it by the signal itself; either way
    // a shell sees status 129.
    expect(run.code === 129 || run.signal === 'SIGHUP', `code ${run.code}, signal ${run.signal}: ${run.stderr}`).toBe(true);
    expect(demoFolders(temp)).toEqual([]);
    expect(holdersOf(pid)).toEqual([]);
  }, 70_000);

  it('SIGHUP mid-run (while waiting): the last state, exit 129, nothing left', async () => {
    const temp = ownTmpDir();
    const demo = startCli(['demo'], { env: cliEnv(null, { TMPDIR: temp }), killAfterMs: 60_000 });
    const pid = demo.child.pid as number;
    await demo.waitFor(/waiting gpu=6 /);
    const worker = workerPid(demo.stdout());
    expect(isAlive(worker)).toBe(true);
    demo.child.kill('SIGHUP');
    const run = await demo.done;
    expect(run.code, run.stderr).toBe(129);
    expect(run.stderr).toMatch(/^gpugate: interrupted gpu=6 /m);
    expect(isAlive(worker)).toBe(false);
    expect(demoFolders(temp)).toEqual([]);
    expect(holdersOf(pid)).toEqual([]);
  }, 70_000);
});
