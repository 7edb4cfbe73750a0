/**
 * `--help` and the status/holders tables fit the terminal: the built command, run as a subprocess
 * with stdout a pipe (80 columns) and under a real pseudo-terminal (`script`, with `stty cols`) of
 * 60 and 120 columns, writes no line wider than that (a single word longer than the width aside),
 * and wrapping breaks no word and loses none. The tables come from a simulated 8-GPU host with
 * long GPU names whose holders are real processes with long command lines.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commandHelp, topLevelHelp } from '../../src/cli/help-text';
import { shortCommand } from '../../src/cli/holder-text';
import { COMMAND_NAMES } from '../../src/cli/option-table';
import { cliEnv, cliPath, runCli } from '../helpers/cli';
import { until } from '../helpers/processes';
import { simDevice, writeScenario } from '../helpers/sim';

const GiB = 2 ** 30;
const GPU_NAME = 'NVIDIA RTX PRO 6000 Blackwell Server Edition';
const TITLE = 'VLLM::Worker_TP3 --model /models/Llama-3.1-70B-Instruct --tensor-parallel-size 8';

/** Runs the command in a pseudo-terminal `columns` wide; its output with the terminal's \r removed. */
function inTerminal(args: string[], columns: number, env: NodeJS.ProcessEnv): string {
  const command = [process.execPath, cliPath(), ...args].map((word) => `'${word}'`).join(' ');
  const r = spawnSync('script', ['-qec', `stty cols ${columns} rows 50; exec ${command}`, '/dev/null'], { encoding: 'utf8', env, timeout: 60_000 });
  expect(r.status, r.stdout).toBe(0);
  return r.stdout.replace(/\r/g, '');
}

/** The lines wider than `width` that are more than one word (one word may be longer than any width). */
function overlong(text: string, width: number): string[] {
  return text.split('\n').filter((line) => line.length > width && line.trim().includes(' '));
}

/** The words of `text`, less the marks wrapping adds: an example's ` \` continuation and its comment's `#`. */
function words(text: string): string[] {
  return text.split(/\s+/).filter((word) => word !== '' && word !== '\\' && word !== '#').sort();
}

const helpPages = (): Array<[string, string[]]> => [['gpugate', ['--help']], ...COMMAND_NAMES.map((command): [string, string[]] => [command, [command, '--help']])];

describe('--help fits the terminal', () => {
  it('writes no line over 80 columns to a pipe, for the summary and every command', async () => {
    for (const [name, args] of helpPages()) {
      const run = await runCli(args);
      expect(run.code, name).toBe(0);
      expect(overlong(run.stdout, 80), name).toEqual([]);
      expect(run.stdout.split('\n').filter((line) => line.length > 80), name).toEqual([]);
    }
  });

  it('breaks no word and loses none: every page holds the words it holds unwrapped', () => {
    expect(words(topLevelHelp('1.0.0', 80))).toEqual(words(topLevelHelp('1.0.0', 100_000)));
    for (const command of COMMAND_NAMES) {
      const narrow = commandHelp(command, 60);
      expect(narrow.split('\n').filter((line) => line.length > 60), command).toEqual([]);
      expect(words(narrow), command).toEqual(words(commandHelp(command, 100_000)));
    }
  });

  it('follows the width of a real terminal (60 and 120 columns)', () => {
    for (const [name, args] of helpPages()) {
      const narrow = inTerminal(args, 60, cliEnv(null));
      expect(narrow, name).toContain('Exit codes:');
      expect(overlong(narrow, 60), name).toEqual([]);
      const wide = inTerminal(args, 120, cliEnv(null));
      expect(overlong(wide, 120), name).toEqual([]);
    }
    // (Two terminals for each of twelve pages: slow on a loaded machine, bounded by the work, not a clock.)
    // The wide terminal is used, not just 80: select's description runs past 80 columns there.
    expect(inTerminal(['select', '--help'], 120, cliEnv(null)).split('\n').some((line) => line.length > 80)).toBe(true);
  }, 300_000);
});

describe('status and holders fit the terminal on an 8-GPU host with long names', () => {
  let holder: ChildProcess | null = null;
  let env: NodeJS.ProcessEnv = {};

  beforeAll(async () => {
    holder = spawn('bash', ['-c', 'exec -a "$0" sleep 300', TITLE], { stdio: 'ignore' });
    const pid = holder.pid!;
    await until(`holder ${pid} to exec`, () => {
      try {
        return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'sleep';
      } catch {
        return false;
      }
    });
    const scenario = writeScenario({
      devices: Array.from({ length: 8 }, (_, i) => simDevice(i, {
        memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 40 * GiB },
        processes: [{ pid, usedBytes: 40 * GiB }],
      })),
    });
    env = cliEnv(scenario);
  });
  afterAll(() => {
    holder?.kill('SIGKILL');
  });

  it('keeps every line within 80 columns in a pipe and within 60 or 120 in a terminal', async () => {
    for (const command of ['status', 'holders']) {
      const piped = await runCli([command], { env });
      expect(piped.code, piped.stderr).toBe(0);
      expect(overlong(piped.stdout, 80), command).toEqual([]);
      for (const columns of [60, 120]) {
        const shown = inTerminal([command], columns, env);
        expect(overlong(shown, columns), `${command} at ${columns}`).toEqual([]);
        // Nothing is lost or cut: the GPU name and the holder's command (as short as the table shows it) keep all their words.
        const tokens = new Set(words(shown));
        const expected = command === 'status' ? GPU_NAME : shortCommand([TITLE]) ?? '';
        for (const word of expected.split(' ')) expect(tokens.has(word), `${command} at ${columns}: ${word}`).toBe(true);
      }
    }
  }, 120_000);

  it('a wide terminal keeps the columns a narrow one folds under each row', () => {
    const wide = inTerminal(['status'], 200, env);
    expect(wide).toMatch(/^GPU +NAME +BUS +USED +FREE +RESERVED +TOTAL +PROCS +PERSIST +COMPUTE +MIG +UTIL +TEMP +POWER$/m);
    expect(wide).toContain(GPU_NAME);
    const narrow = inTerminal(['status'], 60, env);
    expect(narrow).toMatch(/^GPU +NAME +BUS +USED +FREE +TOTAL +PROCS$/m);
    expect(narrow).toMatch(/^ {4}reserved 0B, persist/m);
  });

  it('COLUMNS widens a pipe too', async () => {
    const piped = await runCli(['status'], { env: { ...env, COLUMNS: '200' } });
    expect(piped.stdout).toMatch(/^GPU +NAME +BUS .* POWER$/m);
    expect(piped.stdout).toContain(GPU_NAME);
    const help = await runCli(['select', '--help'], { env: { ...env, COLUMNS: '200' } });
    expect(help.stdout.split('\n').some((line) => line.length > 80)).toBe(true);
  });
});
