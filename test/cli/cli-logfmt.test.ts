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
import { Logger } from '../../src/cli/logger';
import { logEvent } from '../../src/cli/logfmt';
import { cliEnv, runCli, startCli } from '../helpers/cli';
import { logLines, logText } from '../helpers/log-lines';
import { bundledScenario, simDevice, writeScenario } from '../helpers/sim';

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

/** Each stderr line parsed (logLines throws on a bare key); asserts that numbers are numbers. */
function parsedLines(stderr: string): Array<Record<string, string>> {
  const records = logLines(stderr);
  expect(records.length).toBeGreaterThan(0);
  return records.map(({ pairs, line }) => {
    for (const [key, value] of Object.entries(pairs)) {
      if (NUMERIC.test(key) && key !== 'gpu') expect(Number.isFinite(Number(value)), `${key}=${value} in: ${line}`).toBe(true);
    }
    return pairs;
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

describe('escaping: the npm parser reads back every message exactly, or its documented escaped form', () => {
  // [what was logged, what the parser returns]: quotes, backslashes, `=` and non-ASCII come back
  // as they are; lines joined with ` | ` (trimmed, blank ones dropped); any other control
  // character, and the bidirectional marks, as the visible escape a terminal shows (\x0d, \u{202e}).
  const cases: Array<[string, string]> = [
    ['plain', 'plain'],
    ['', ''],
    ['say "hi" to --margin "2 GiB"', 'say "hi" to --margin "2 GiB"'],
    ['a path C:\\dir\\new and a lone \\', 'a path C:\\dir\\new and a lone \\'],
    ['key=value a==b =', 'key=value a==b ='],
    ['two\nlines', 'two | lines'],
    ['windows\r\nlines', 'windows | lines'],
    ['the escape text \\n stays text', 'the escape text \\n stays text'],
    ['a bare\rreturn', 'a bare\\x0dreturn'],
    ['a\ttab', 'a\\x09tab'],
    ['grüße, 日本語, emoji 🚀', 'grüße, 日本語, emoji 🚀'],
    ['escape \u001b[31mred\u001b[0m bell\u0007 nul\u0000 del\u007f c1\u009b', 'escape \\x1b[31mred\\x1b[0m bell\\x07 nul\\x00 del\\x7f c1\\x9b'],
    ['bidi \u202eevil\u2066 and a separator\u2028here', 'bidi \\u{202e}evil\\u{2066} and a separator\\u{2028}here'],
    ['"', '"'],
    ['\\"', '\\"'],
    ['trailing blanks   \n\n\n  after blank lines', 'trailing blanks | after blank lines'],
    ['gpugate: the prefix is not repeated', 'the prefix is not repeated'],
  ];

  function written(entry: Parameters<Logger['error']>[0], journal = false): string {
    const out: string[] = [];
    new Logger({ journal, verbosity: 'normal', sink: { write: (text: string) => out.push(text) } }).error(entry);
    expect(out).toHaveLength(1);
    const line = out[0]!;
    // One line, and nothing in it a terminal or the journal would act on.
    expect(line.endsWith('\n') && line.indexOf('\n') === line.length - 1, JSON.stringify(line)).toBe(true);
    expect(line.slice(0, -1), JSON.stringify(line)).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
    return line;
  }

  it.each(cases)('a message %j', (message, expected) => {
    const [record] = logLines(written(message));
    expect(record?.pairs).toEqual({ msg: expected });
  });

  // A value is not a message: a leading `gpugate: ` is its own text.
  const values = cases.filter(([message]) => !message.startsWith('gpugate: '));

  it.each(values)('an event value %j, with the journald prefix kept', (value, expected) => {
    const [record] = logLines(written(logEvent('stale', [['gpu', 0], ['name', value], ['pid', 42]]), true));
    expect(record?.priority).toBe(3);
    expect(record?.pairs).toEqual({ event: 'stale', gpu: '0', name: expected, pid: '42' });
  });

  it('the readable rendering: the prefix, the message, the failure reason with its exit code', () => {
    expect(logText(written('first line\n  second line'))).toBe('gpugate: first line | second line\n');
    expect(logText(written(logEvent('failed', [['result', 'timeout'], ['reason', 'GPUs not "free"'], ['exit', 75], ['exit_name', 'TEMPFAIL']])))).toBe('gpugate: GPUs not "free" (exit 75/TEMPFAIL)\n');
  });

  it('the built command: a usage error quoting a hostile value parses back to its escaped form', async () => {
    const hostile = 'two "GiB"\\\n\u001b[2J=x';
    const run = await runCli(['wait', '--margin', hostile]);
    expect(run.code).toBe(64);
    const records = parsedLines(run.stderr);
    expect(records).toHaveLength(1);
    // The message quotes the input as JSON does; the parser returns that text exactly, unescaped.
    expect(records[0]!.msg).toContain(`--margin ${JSON.stringify(hostile)}: invalid size ${JSON.stringify(hostile)}`);
    expect(logText(run.stderr)).toMatch(/^gpugate: --margin "two /);
  });
});
