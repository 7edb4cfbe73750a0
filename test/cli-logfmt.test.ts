/**
 * The log is real logfmt: every line the built command writes to a pipe, in a whole wait on the
 * restart race (with -v), a wait that times out, a check that finds a stale holder (a real
 * reparented process), and a wait interrupted by a real SIGINT, is read by the `logfmt` parser
 * from the npm registry into `event=` (or `msg=`) and key=value pairs only: no bare key, sizes
 * and durations also as numbers, the final reason quoted whole.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { cliEnv, runCli, startCli } from './helpers/cli';
import { bundledScenario, simDevice, writeScenario } from './helpers/sim';

// The parser has no type declarations: this is the part of it the test uses.
const logfmtParser = require('logfmt') as { parse(line: string): Record<string, string | true> };

const GiB = 2 ** 30;
const orphans: number[] = [];
afterAll(() => {
  for (const pid of orphans) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

/** Keys whose values are numbers a program would add up or compare. */
const NUMERIC = /^(gpu|pid|ppid|polls|exit|orphan|.*_bytes|.*_ms)$/;

/** Each stderr line parsed; asserts that it is logfmt through and through. */
function parsedLines(stderr: string): Array<Record<string, string>> {
  const lines = stderr.split('\n').filter((line) => line !== '');
  expect(lines.length).toBeGreaterThan(0);
  return lines.map((line) => {
    const parsed = logfmtParser.parse(line);
    for (const [key, value] of Object.entries(parsed)) {
      expect(value, `bare key ${key} in: ${line}`).not.toBe(true);
      if (NUMERIC.test(key) && key !== 'gpu') expect(Number.isFinite(Number(value)), `${key}=${String(value)} in: ${line}`).toBe(true);
    }
    expect('event' in parsed || 'msg' in parsed, line).toBe(true);
    return parsed as Record<string, string>;
  });
}

describe('every log line parses as logfmt', () => {
  const race = bundledScenario('restart-race');

  it('a whole wait on the restart race, polls included', async () => {
    const run = await runCli(['wait', '--min-free', '0.9', '--stable', '1s', '-v'], { env: cliEnv(race, { GPUGATE_SIM_STARTED_AT: 'init' }) });
    expect(run.code).toBe(0);
    const lines = parsedLines(run.stderr);
    const waiting = lines.filter((line) => line.event === 'waiting');
    expect(waiting.length).toBeGreaterThan(0);
    for (const line of waiting) {
      expect(line).toMatchObject({ gpu: expect.stringMatching(/^\d$/), uuid: expect.stringMatching(/^GPU-/), used: expect.stringMatching(/B$/) });
      // The size as people read it and the bytes a program sums agree.
      expect(Number(line.used_bytes)).toBeGreaterThanOrEqual(0);
      expect(Number(line.need_free_bytes)).toBeGreaterThan(80 * GiB);
      expect(Number(line.timeout_ms)).toBeGreaterThan(0);
      expect(line.elapsed_ms).toMatch(/^\d+$/);
    }
    expect(lines.some((line) => line.event === 'poll')).toBe(true);
    expect(lines.some((line) => line.event === 'nvml' && line.library !== undefined)).toBe(true);
    const ready = lines.at(-1)!;
    expect(ready).toMatchObject({ event: 'ready', gpus: '0,1,2,3,4,5,6,7' });
    expect(Number(ready.elapsed_ms)).toBeGreaterThan(0);
    expect(Number(ready.polls)).toBeGreaterThan(0);
  });

  it('a wait that times out: its last state per GPU, then the reason quoted whole with the exit code', async () => {
    const notBegun = String(Date.now() + 3_600_000);
    const run = await runCli(['wait', '--min-free', '0.9', '--stable', '1s', '--timeout', '1s'], { env: cliEnv(race, { GPUGATE_SIM_STARTED_AT: notBegun }) });
    expect(run.code).toBe(75);
    const lines = parsedLines(run.stderr);
    expect(lines.filter((line) => line.event === 'timeout').map((line) => line.gpu), run.stderr).toEqual(['0', '1', '2', '3', '4', '5', '6', '7']);
    const final = lines.at(-1)!;
    expect(final).toMatchObject({ event: 'failed', result: 'timeout', exit: '75', exit_name: 'TEMPFAIL' });
    expect(final.reason).toMatch(/^GPUs not free after 1s: GPU 0 \(GPU-\S+\): free 3\.1GiB < needed 86GiB; .*GPU 7 /);
    expect(run.stderr.split('\n').at(-2)).toMatch(/^event=failed result=timeout reason="GPUs not free after 1s: [^"]*" exit=75 exit_name=TEMPFAIL$/);
  });

  it('a check that finds a stale holder (a real reparented engine worker)', async () => {
    const started = spawnSync('bash', ['-c', 'exec -a VLLM::Worker_TP3 sleep 60 </dev/null >/dev/null 2>&1 & echo $!'], { encoding: 'utf8' });
    const pid = Number(started.stdout.trim());
    orphans.push(pid);
    for (let i = 0; i < 200 && !readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('VLLM::Worker_TP3\0'); i += 1) await new Promise((resolve) => setTimeout(resolve, 25));
    const scenario = writeScenario({
      devices: [simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 60 * GiB }, processes: [{ pid, usedBytes: 50 * GiB, kinds: ['compute'] }] })],
    });
    const run = await runCli(['check', '--max-used', '1GiB'], { env: cliEnv(scenario) });
    expect(run.code).toBe(75);
    const lines = parsedLines(run.stderr);
    const stale = lines.find((line) => line.event === 'stale');
    expect(stale).toMatchObject({ gpu: '0', pid: String(pid), class: 'orphan', name: 'VLLM::Worker_TP3', used: '50GiB', used_bytes: String(50 * GiB) });
    expect(stale?.reason).toMatch(/ /);
    expect(lines.at(-1)).toMatchObject({ event: 'failed', result: 'busy', exit: '75' });
  });

  it('a wait interrupted by SIGINT', async () => {
    const notBegun = String(Date.now() + 3_600_000);
    const cli = startCli(['wait', '--min-free', '0.9', '--timeout', '10m'], { env: cliEnv(race, { GPUGATE_SIM_STARTED_AT: notBegun }) });
    await cli.waitFor(/^event=waiting gpu=7 /m);
    cli.child.kill('SIGINT');
    const run = await cli.done;
    expect(run.code).toBe(130);
    const lines = parsedLines(run.stderr);
    expect(lines.filter((line) => line.event === 'interrupted').length).toBe(8);
    expect(lines.at(-1)).toMatchObject({ event: 'failed', result: 'interrupted', exit: '130' });
  });
});
