/**
 * `gpugate demo` from the built command: no GPU, no flags; it shows the orphaned engine worker,
 * the wait explaining why, succeeds once the simulated memory is free and stable, prints the
 * systemd lines, and leaves no process and no temporary folder behind (also when interrupted).
 */
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { cliEnv, runCli, startCli } from './helpers/cli';
import { isAlive } from './helpers/processes';

function demoFolders(): string[] {
  return readdirSync(tmpdir()).filter((name) => name.startsWith('gpugate-demo-'));
}

function workerPid(stdout: string): number {
  const match = /pid (\d+) "VLLM::Worker_TP6"/.exec(stdout);
  if (match === null) throw new Error(`the demo did not name its worker:\n${stdout}`);
  return Number(match[1]);
}

describe('gpugate demo', () => {
  it('replays the restart race and exits 0, leaving nothing behind', async () => {
    const before = demoFolders();
    const run = await runCli(['demo'], { env: cliEnv(null), killAfterMs: 60_000 });
    expect(run.code).toBe(0);
    const pid = workerPid(run.stdout);
    expect(run.stderr).toMatch(new RegExp(`^gpugate: stale gpu=6 pid=${pid} class=orphan name=VLLM::Worker_TP6 `, 'm'));
    expect(run.stderr).toMatch(new RegExp(`^gpugate: waiting gpu=6 .*used=92GiB .*need_free=86GiB holders=${pid}/VLLM::Worker_TP6/orphan`, 'm'));
    expect(run.stderr).toMatch(/^gpugate: waiting gpu=\d .*holders=\d+\/\?\/gone/m);
    expect(run.stderr).toMatch(/why=unstable stable_for=/);
    expect(run.stderr).toMatch(/^gpugate: ready gpus=0,1,2,3,4,5,6,7 /m);
    expect(run.stdout).toContain('ExecStartPre=gpugate wait --min-free 0.9 --margin 2GiB --stable 5s --timeout 240s --notify');
    expect(run.stdout).toContain('ExecStopPost=-gpugate wait --timeout 100s');
    expect(run.elapsedMs).toBeLessThan(50_000);
    expect(isAlive(pid)).toBe(false);
    expect(demoFolders()).toEqual(before);
  }, 70_000);

  it('cleans up its worker and folder when interrupted with SIGINT (exit 130)', async () => {
    const before = demoFolders();
    const demo = startCli(['demo'], { env: cliEnv(null), killAfterMs: 60_000 });
    await demo.waitFor(/waiting gpu=6 /);
    const pid = workerPid(demo.stdout());
    expect(isAlive(pid)).toBe(true);
    demo.child.kill('SIGINT');
    const run = await demo.done;
    expect(run.code).toBe(130);
    expect(run.stderr).toMatch(/^gpugate: interrupted gpu=6 /m);
    expect(isAlive(pid)).toBe(false);
    expect(demoFolders()).toEqual(before);
  }, 70_000);
});
