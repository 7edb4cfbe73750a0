/**
 * Output that cannot be abused: a real process whose name carries terminal escape sequences
 * (written to /proc/self/comm, and as argv[0]) and a simulated GPU whose name carries ESC reach
 * the status and holders tables and the final error line only escaped; JSON and Prometheus
 * keep their own escaping. The built command as a subprocess, through the real addon.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { cliEnv, parseJsonOutput, runCli } from '../helpers/cli';
import { simDevice, writeScenario } from '../helpers/sim';
import { escapeForTerminal } from '../../src/cli/terminal-text';

const GiB = 1024 ** 3;
// Clear the screen, move home, and set the window title: what an attacker's name would try.
const EVIL_COMM = '\u001b[2J\u001b[H\rok';
const EVIL_ARGV0 = '\u001b]0;pwned\u0007VLLM::\u009b31m';
const EVIL_GPU_NAME = 'NVIDIA \u001b[8mhidden\u001b[0m RTX \u202eevil';
const children: ChildProcess[] = [];
let holder = 0;
let scenario = '';

/** The raw control characters that must never reach a terminal. */
const RAW_CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e]/;

/** True while `holder` is still the process started here (its comm and argv[0] are the evil ones). */
function holderIsOurs(): boolean {
  try {
    return readFileSync(`/proc/${holder}/comm`, 'utf8') === `${EVIL_COMM}\n` && readFileSync(`/proc/${holder}/cmdline`, 'utf8').startsWith(`${EVIL_ARGV0}\0`);
  } catch {
    return false;
  }
}

beforeAll(async () => {
  // argv[0] set at exec (the holders table shows the command line's first word), then the
  // process renames its own comm (the status table shows comm), as any unprivileged user can.
  // Node, not a python3 on PATH: an interpreter shim (pyenv) re-executes under its own argv[0].
  const code = `require('fs').writeFileSync('/proc/self/comm', process.argv[1]); console.log('ready'); setTimeout(() => {}, 60_000);`;
  const child = spawn(process.execPath, ['-e', code, EVIL_COMM], { argv0: EVIL_ARGV0, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (status) => reject(new Error(`holder exited with ${status}`)));
  });
  holder = child.pid!;
  if (!holderIsOurs()) throw new Error(`holder ${holder} does not carry the names it was given: ${readFileSync(`/proc/${holder}/cmdline`, 'utf8')}`);
  scenario = writeScenario({
    devices: [
      simDevice(0, {
        name: EVIL_GPU_NAME,
        memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 40 * GiB },
        processes: [{ pid: holder, usedBytes: 40 * GiB }],
      }),
    ],
  });
});

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
});

beforeEach(() => {
  // Every test reads the holder through the simulator's pid: it must still be this process.
  expect(holderIsOurs(), `holder ${holder} is gone or its pid was reused`).toBe(true);
});

describe('escapeForTerminal', () => {
  it('writes C0, DEL, C1 and bidirectional controls as visible escapes and leaves other text alone', () => {
    expect(escapeForTerminal('\u001b[31mred\u0007\r\t\u007f\u009b\u202e\u2066 ü 日本 \\x')).toBe('\\x1b[31mred\\x07\\x0d\\x09\\x7f\\x9b\\u{202e}\\u{2066} ü 日本 \\x');
  });
});

describe('text output escapes control characters from names', () => {
  it('status: the GPU name and the process comm appear escaped', async () => {
    // Wide enough that the name is not wrapped at its spaces (off a terminal, tables fit 80 columns).
    const run = await runCli(['status'], { env: cliEnv(scenario, { COLUMNS: '400' }) });
    expect(run.code).toBe(0);
    expect(run.stdout).not.toMatch(RAW_CONTROL);
    expect(run.stdout).toContain(escapeForTerminal(EVIL_GPU_NAME));
    expect(run.stdout).toContain(`pid ${holder} ${escapeForTerminal(EVIL_COMM)}`);
  });

  it('status: a driver version string with ESC appears escaped in the header', async () => {
    const file = writeScenario({ system: { driverVersion: '580.95\u001b[2J' }, devices: [simDevice(0)] });
    const run = await runCli(['status'], { env: cliEnv(file) });
    expect(run.code).toBe(0);
    expect(run.stdout).not.toMatch(RAW_CONTROL);
    expect(run.stdout).toMatch(/^NVML .* driver 580\.95\\x1b\[2J /m);
  });

  it('holders: the command name appears escaped in the table', async () => {
    const run = await runCli(['holders'], { env: cliEnv(scenario) });
    expect(run.code).toBe(0);
    expect(run.stdout).not.toMatch(RAW_CONTROL);
    expect(run.stdout).toContain(escapeForTerminal(EVIL_ARGV0));
  });

  it('check: the final error line and the progress lines carry no raw control character', async () => {
    const run = await runCli(['check', '--max-used', '1GiB'], { env: cliEnv(scenario) });
    expect(run.code).toBe(75);
    expect(run.stderr).not.toMatch(RAW_CONTROL);
    // The escape's own backslash is escaped again by logfmt's quoting: a parser reads back `\x1b`.
    expect(run.stderr).toMatch(/^event=failed result=busy reason="GPUs not free: .*held by \d+\/\\\\x1b\]0;pwned\\\\x07VLLM::\\\\x9b31m\/active .*" exit=75 exit_name=TEMPFAIL$/m);
  });

  it('JSON keeps the names exact, C0 controls JSON-escaped (what JSON requires; other characters stay data)', async () => {
    const run = await runCli(['status', '--json'], { env: cliEnv(scenario) });
    expect(run.stdout.trimEnd()).not.toMatch(/[\u0000-\u001f]/);
    expect(run.stdout).toContain('\\u001b[8mhidden');
    const json = parseJsonOutput(run) as { devices?: Array<{ name: string }>; gpus?: Array<{ name: string }> };
    const names = (json.devices ?? json.gpus ?? []).map((gpu) => gpu.name);
    expect(names).toEqual([EVIL_GPU_NAME]);
    const check = await runCli(['check', '--max-used', '1GiB', '--json'], { env: cliEnv(scenario) });
    const holders = (parseJsonOutput(check).gpus as Array<{ holders: Array<{ cmdline: string | null }> }>)[0]!.holders;
    expect(holders[0]!.cmdline?.startsWith(EVIL_ARGV0)).toBe(true);
  });

  it('Prometheus label values are escaped per the text format: one sample per line, no line injected', async () => {
    const name = 'GPU "quoted" \\ back\nslash';
    const file = writeScenario({ devices: [simDevice(0, { name })] });
    const run = await runCli(['status', '--format', 'prometheus'], { env: cliEnv(file) });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('name="GPU \\"quoted\\" \\\\ back\\nslash"');
    const lines = run.stdout.trim().split('\n');
    // The exposition ends with OpenMetrics' end marker (a comment to the Prometheus text parser).
    expect(lines.pop()).toBe('# EOF');
    for (const line of lines) expect(line).toMatch(/^(# (HELP|TYPE) \w+ .*|\w+(\{.*\})? \S+( \d+)?)$/);
  });
});
