/**
 * The built `gpugate` command's command line: --version, --help per command with examples,
 * usage errors (exit 64) that name the bad input and suggest the nearest command or flag,
 * impossible configurations (exit 78); messages are prefixed once, and a multi-line message keeps
 * its lines on a real terminal (a pty) but is one line in a pipe.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { COMMAND_NAMES } from '../../src/cli/option-table';
import { ConfigError } from '../../src/config-error';
import { resolveCriteria, type CriteriaOptions } from '../../src/gate/criteria';
import { parseSizeOrFraction, parseSizeOrPercentage } from '../../src/units';
import { cliEnv, cliPath, parseJsonOutput, runCli } from '../helpers/cli';
import { logText } from '../helpers/log-lines';
import { simDevice, writeScenario } from '../helpers/sim';
import { thrownBy } from '../helpers/thrown-by';

const twoIdleGpus = writeScenario({ devices: [simDevice(0), simDevice(1)] });

describe('gpugate command line', () => {
  it('is an executable file whose shebang starts node with --disable-sigusr1', () => {
    accessSync(cliPath(), constants.X_OK);
    expect(readFileSync(cliPath(), 'utf8').startsWith('#!/usr/bin/env -S node --disable-sigusr1\n')).toBe(true);
  });

  it('prints the package version with --version', async () => {
    const run = await runCli(['--version']);
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', `file://${__filename}`), 'utf8')) as { version: string };
    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toBe(`gpugate ${pkg.version}`);
  });

  it('lists every command in the top-level help', async () => {
    const run = await runCli(['--help']);
    expect(run.code).toBe(0);
    for (const command of ['wait', 'check', 'status', 'holders', 'demo']) expect(run.stdout).toMatch(new RegExp(`^  ${command} `, 'm'));
    expect(run.stdout).toContain('75');
  });

  it.each(['wait', 'check', 'status', 'holders', 'demo'])('gives %s its own --help with examples and exit codes', async (command) => {
    const run = await runCli([command, '--help']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`Usage: gpugate ${command}`);
    expect(run.stdout).toMatch(/Examples:\n {2}gpugate /);
    expect(run.stdout).toContain('Exit codes:');
    expect(run.stderr).toBe('');
  });

  it('documents every wait flag of the contract in wait --help', async () => {
    const run = await runCli(['wait', '--help']);
    for (const flag of ['--gpus', '--min-free', '--margin', '--max-used', '--no-processes', '--ignore', '--stable', '--stable-tolerance',
      '--timeout', '--interval', '--nvml-timeout', '--stale', '--kill-stale', '--kill-grace', '--dry-run', '--clean-shm', '--json',
      '--notify', '--report-file', '--quiet', '--verbose', '--library']) {
      expect(run.stdout).toContain(flag);
    }
  });

  it('exits 64 naming an unknown flag', async () => {
    const run = await runCli(['wait', '--frobnicate'], { env: cliEnv(twoIdleGpus) });
    expect(run.code).toBe(64);
    expect(logText(run.stderr)).toContain("unknown option '--frobnicate'");
    expect(logText(run.stderr)).toContain('gpugate wait --help');
  });

  it('exits 64 naming an unknown command', async () => {
    const run = await runCli(['wiat']);
    expect(run.code).toBe(64);
    expect(logText(run.stderr)).toContain("unknown command 'wiat'");
  });

  it('suggests the nearest command for a typo (a swap, a missing letter, a prefix) and none for nonsense', async () => {
    for (const [typed, meant] of [['stauts', 'status'], ['holdres', 'holders'], ['wai', 'wait'], ['hold', 'holders'], ['chekc', 'check']]) {
      const run = await runCli([typed as string]);
      expect(run.code).toBe(64);
      expect(logText(run.stderr)).toBe(`gpugate: unknown command '${typed}' (did you mean '${meant}'?): expected one of ${COMMAND_NAMES.join(', ')} (see gpugate --help)\n`);
    }
    const help = await runCli(['help', 'stauts']);
    expect(logText(help.stderr)).toContain("(did you mean 'status'?)");
    const nonsense = await runCli(['frobnicate']);
    expect(logText(nonsense.stderr)).not.toContain('did you mean');
  });

  it('suggests the nearest flag of the command, or names the commands that take a flag given to another', async () => {
    const typo = await runCli(['wait', '--min-fre', '0.9'], { env: cliEnv(twoIdleGpus) });
    expect(typo.code).toBe(64);
    expect(logText(typo.stderr)).toBe("gpugate wait: unknown option '--min-fre' (did you mean '--min-free'?) (see gpugate wait --help)\n");
    const swapped = await runCli(['status', '--jsno'], { env: cliEnv(twoIdleGpus) });
    expect(logText(swapped.stderr)).toContain("(did you mean '--json'?)");
    const elsewhere = await runCli(['check', '--timeout', '5s'], { env: cliEnv(twoIdleGpus) });
    expect(elsewhere.code).toBe(64);
    expect(logText(elsewhere.stderr)).toContain("--timeout is an option of 'gpugate wait', 'gpugate select', not of 'gpugate check'");
  });

  it('never repeats the prefix: a message naming its command is written as it is', async () => {
    for (const args of [['wait', '--frobnicate'], ['check', '-q', '-v'], ['status', 'extra'], ['check', '--dry-run']]) {
      const run = await runCli(args, { env: cliEnv(twoIdleGpus) });
      expect(run.code).toBe(64);
      expect(logText(run.stderr)).toMatch(new RegExp(`^gpugate ${args[0] as string}: `));
      expect(logText(run.stderr)).not.toMatch(/gpugate: gpugate/);
    }
  });

  it('keeps the lines of a multi-line error on a terminal, and joins them with " | " in a pipe', () => {
    const args = [cliPath(), 'status', '--library', '/nonexistent/libnvidia-ml.so.1'];
    const env = cliEnv(null, { NO_COLOR: '1' });
    // A real pseudo-terminal: python's pty module runs the command with stdin/stdout/stderr on it.
    const onTerminal = spawnSync('python3', ['-c', 'import os, pty, sys; sys.exit(os.waitstatus_to_exitcode(pty.spawn(sys.argv[1:])))', process.execPath, ...args],
      { env, encoding: 'utf8', timeout: 30_000 });
    expect(onTerminal.status).toBe(69);
    const lines = onTerminal.stdout.replace(/\r\n/g, '\n').trimEnd().split('\n');
    expect(lines.length).toBeGreaterThan(1);
    expect(lines[0]).toMatch(/^gpugate: the library given by the libraryPath option/);
    expect(lines.join(' ').replace(/ +/g, ' ')).toMatch(/\(\/nonexistent\/libnvidia-ml\.so\.1\) could not be loaded\. Tried: - \/nonexistent\/libnvidia-ml\.so\.1: /);
    // Later lines are indented under the first; none is wider than the terminal's 80 columns.
    for (const line of lines.slice(1)) expect(line).toMatch(/^ {2,}\S/);
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(80);
    expect(onTerminal.stdout).not.toContain(' | ');
    const inPipe = spawnSync(process.execPath, args, { env, encoding: 'utf8', timeout: 30_000 });
    expect(inPipe.status).toBe(69);
    expect(inPipe.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(logText(inPipe.stderr)).toContain(' | ');
  });

  it('exits 64 without a command', async () => {
    const run = await runCli([]);
    expect(run.code).toBe(64);
    expect(logText(run.stderr)).toContain('missing command');
  });

  it('exits 64 for a bad size, naming the flag, the value and what was expected', async () => {
    const run = await runCli(['wait', '--margin', '2 GiBs', '--min-free', '0.9'], { env: cliEnv(twoIdleGpus) });
    expect(run.code).toBe(64);
    expect(logText(run.stderr)).toContain('--margin "2 GiBs"');
    expect(logText(run.stderr)).toMatch(/expected a size/);
  });

  it('exits 64 for a bare-number duration and says units are needed', async () => {
    const run = await runCli(['wait', '--timeout', '30'], { env: cliEnv(twoIdleGpus) });
    expect(run.code).toBe(64);
    expect(logText(run.stderr)).toContain('--timeout "30"');
    expect(logText(run.stderr)).toMatch(/duration/);
  });

  it('exits 64 for a duration longer than a timer holds, naming the flag and the longest accepted', async () => {
    for (const [flag, value] of [['--timeout', '600h'], ['--interval', '1000h'], ['--stable', '2147483648ms'], ['--nvml-timeout', '700h']]) {
      const run = await runCli(['wait', flag!, value!], { env: cliEnv(twoIdleGpus) });
      expect(run.code, run.stderr).toBe(64);
      expect(logText(run.stderr)).toContain(`${flag} "${value}"`);
      expect(logText(run.stderr)).toContain('the longest accepted is 596h31m (2147483647 ms)');
    }
  });

  it('sizes: a bare number is refused where a size is expected (exit 64 naming the flag, the input and the accepted forms)', async () => {
    // 40 GiB held: `--max-used 1` once passed it as "100 %", `--max-used 2` meant 2 bytes.
    const held = writeScenario({ devices: [simDevice(0, { memory: { totalBytes: 96 * 1024 ** 3, reservedBytes: 0, usedBytes: 40 * 1024 ** 3 } })] });
    for (const value of ['1', '2', '0.5']) {
      const run = await runCli(['check', '--max-used', value], { env: cliEnv(held) });
      expect(run.code, run.stderr).toBe(64);
      expect(logText(run.stderr)).toContain(`--max-used "${value}"`);
      expect(logText(run.stderr)).toMatch(/expected a size with a unit such as 1GiB .*or a percentage of total memory such as 90%/);
    }
    for (const [flag, value] of [['--margin', '2048'], ['--stable-tolerance', '100']]) {
      const run = await runCli(['wait', '--min-free', '0.5', flag!, value!], { env: cliEnv(held) });
      expect(run.code, run.stderr).toBe(64);
      expect(logText(run.stderr)).toContain(`${flag} "${value}"`);
      expect(logText(run.stderr)).toContain(`a number needs a unit (for bytes write ${value}B)`);
    }
    const bytes = await runCli(['check', '--min-free', '4096'], { env: cliEnv(held) });
    expect(bytes.code, bytes.stderr).toBe(64);
    expect(logText(bytes.stderr)).toContain('--min-free "4096"');
    expect(logText(bytes.stderr)).toMatch(/a bare number is a fraction of total memory and must be at most 1; for a size write a unit/);
    // The accepted forms judge the held GPU as they say.
    expect((await runCli(['check', '--max-used', '1GiB'], { env: cliEnv(held) })).code).toBe(75);
    expect((await runCli(['check', '--max-used', '30%'], { env: cliEnv(held) })).code).toBe(75);
    expect((await runCli(['check', '--max-used', '50%'], { env: cliEnv(held) })).code).toBe(0);
    expect((await runCli(['check', '--min-free', '0.5'], { env: cliEnv(held) })).code).toBe(0);
    expect((await runCli(['check', '--min-free', '60GiB'], { env: cliEnv(held) })).code).toBe(75);
  });

  it('exits 78 for --min-free 1 or 100% (all memory free: the driver always reserves some), at once rather than after waiting', async () => {
    for (const value of ['1', '100%']) {
      const run = await runCli(['wait', '--min-free', value, '--timeout', '10m', '--json'], { env: cliEnv(twoIdleGpus) });
      expect(run.code, run.stderr).toBe(78);
      expect(logText(run.stderr)).toContain(`--min-free "${value}": minFree fraction 1 is out of range: expected above 0 and below 1`);
    }
  });

  it('a fraction outside 0–1 is one answer: 78 naming the flag in the command, ConfigError from the library with the same value', async () => {
    const cases: Array<[flags: string[], option: 'minFree' | 'maxUsed', library: CriteriaOptions]> = [
      [['--min-free', '150%'], 'minFree', { minFree: parseSizeOrFraction('150%') }],
      [['--min-free', '0%'], 'minFree', { minFree: parseSizeOrFraction('0%') }],
      [['--max-used', '150%'], 'maxUsed', { maxUsed: parseSizeOrPercentage('150%') }],
      [['--for', 'vllm', '--min-free', '100%'], 'minFree', { minFree: { engine: 'vllm', utilization: 1 } }],
      [['--for', 'vllm', '--min-free', '0%'], 'minFree', { minFree: { engine: 'vllm', utilization: 0 } }],
      // Under --for a bare number is the engine's fraction, whatever its value.
      [['--for', 'vllm', '--min-free', '1.5'], 'minFree', { minFree: { engine: 'vllm', utilization: 1.5 } }],
    ];
    for (const [flags, option, library] of cases) {
      const run = await runCli(['wait', ...flags, '--timeout', '10m', '--json'], { env: cliEnv(twoIdleGpus) });
      expect(run.code, `${flags.join(' ')}: ${run.stderr}`).toBe(78);
      expect(logText(run.stderr)).toContain(`${flags.at(-2) ?? ''} "${flags.at(-1) ?? ''}": ${option} `);
      expect(parseJsonOutput(run)).toMatchObject({ result: 'config-error', exitCode: 78 });
      expect(thrownBy(() => resolveCriteria(library), ConfigError)).toMatchObject({ name: 'ConfigError', code: 'GPUGATE_CONFIG', option });
    }
    // 0 % is a valid --max-used (nothing in use), as the library's maxUsed fraction 0 is.
    expect((await runCli(['check', '--max-used', '0%'], { env: cliEnv(twoIdleGpus) })).code).toBe(0);
    expect(resolveCriteria({ maxUsed: parseSizeOrPercentage('0%') }).maxUsed).toEqual({ fraction: 0 });
  });

  it('exits 64 for a flag that needs a value but has none', async () => {
    const run = await runCli(['check', '--gpus'], { env: cliEnv(twoIdleGpus) });
    expect(run.code).toBe(64);
    expect(logText(run.stderr)).toContain("option '--gpus' needs a value");
  });

  it('exits 64 for --stale with an unknown policy', async () => {
    const run = await runCli(['wait', '--stale', 'sometimes'], { env: cliEnv(twoIdleGpus) });
    expect(run.code).toBe(64);
    expect(logText(run.stderr)).toContain('expected report, fail or ignore');
  });

  it('exits 64 for --dry-run without an action to rehearse', async () => {
    const run = await runCli(['wait', '--dry-run'], { env: cliEnv(twoIdleGpus) });
    expect(run.code).toBe(64);
    expect(logText(run.stderr)).toContain('--dry-run only applies');
  });

  it("exits 64 when a command other than wait gets '--'", async () => {
    const run = await runCli(['check', '--', 'true'], { env: cliEnv(twoIdleGpus) });
    expect(run.code).toBe(64);
    expect(logText(run.stderr)).toContain("accepted only by 'gpugate wait'");
  });

  it('exits 64 for a stray argument and hints at -- for wait', async () => {
    const run = await runCli(['wait', 'vllm'], { env: cliEnv(twoIdleGpus) });
    expect(run.code).toBe(64);
    expect(logText(run.stderr)).toContain("unexpected argument 'vllm'");
    expect(logText(run.stderr)).toContain("'--'");
  });

  it('exits 78 when --gpus matches no GPU, listing what exists', async () => {
    const run = await runCli(['check', '--gpus', '5', '--json'], { env: cliEnv(twoIdleGpus) });
    expect(run.code).toBe(78);
    expect(logText(run.stderr)).toMatch(/5/);
    expect(logText(run.stderr)).toContain('GPU-7e570000-0000-4000-8000-000000000000');
    const json = parseJsonOutput(run);
    expect(json.exitCode).toBe(78);
    expect(json.result).toBe('config-error');
  });

  it('exits 78 for an empty --gpus (e.g. an unset $SLURM_JOB_GPUS)', async () => {
    const run = await runCli(['check', '--gpus', ''], { env: cliEnv(twoIdleGpus) });
    expect(run.code).toBe(78);
    expect(logText(run.stderr)).toContain('selects no GPU');
  });

  it('exits 78 when the free-memory need exceeds the GPU total', async () => {
    const run = await runCli(['check', '--min-free', '200GiB'], { env: cliEnv(twoIdleGpus) });
    expect(run.code).toBe(78);
    expect(logText(run.stderr)).toMatch(/200GiB|exceed|above|total/i);
  });
});
