/**
 * Fuzzing the `gpugate` command line with fast-check: argument vectors with exactly one thing
 * wrong (an unknown flag or command, a bad size / duration / choice, a missing or unwanted
 * value, a stray word, a flag of another command, conflicting flags, an empty --gpus) hidden
 * among valid flags. Every one must exit 64 (usage) or 78 (configuration) with one message that
 * names the bad input, never 70 or a stack trace. Most vectors run in-process through the
 * compiled entry point `main(argv, env)`; a sample runs as real subprocesses.
 */
import fc from 'fast-check';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMMAND_NAMES, optionsFor } from '../../src/cli/option-table';
import { MAX_DURATION_MS, parseDuration, parseSize, parseSizeOrFraction, parseSizeOrPercentage } from '../../src/units';
import { cliEnv, runCli } from '../helpers/cli';
import { logLines, logText } from '../helpers/log-lines';
import { repoRoot } from '../helpers/sim';
import { describeRuns, fuzzParameters } from './helpers/fuzz-settings';

const IN_PROCESS_RUNS = 400;
const SUBPROCESS_RUNS = 8;
const printed: string[] = [];
afterAll(() => console.log(`fuzz (cli): ${printed.join('; ')}`));

type Command = 'wait' | 'check' | 'status' | 'holders';
const COMMANDS: readonly Command[] = ['wait', 'check', 'status', 'holders'];
const KNOWN_WORDS = new Set(['wait', 'check', 'status', 'holders', 'demo', 'help', '--help', '-h', '--version', '-V', '--']);

/** Valid `--flag=value` tokens per command; a malformed token is hidden among some of them. */
const VALID: Record<Command, Array<[string, string]>> = {
  wait: [['json', '--json'], ['stale', '--stale=ignore'], ['timeout', '--timeout=5s'], ['interval', '--interval=200ms'], ['gpus', '--gpus=0'],
    ['max-used', '--max-used=2GiB'], ['stable', '--stable=1s'], ['nvml-timeout', '--nvml-timeout=2s'], ['quiet', '-q'], ['no-processes', '--no-processes']],
  check: [['json', '--json'], ['stale', '--stale=ignore'], ['gpus', '--gpus=0'], ['max-used', '--max-used=2GiB'], ['nvml-timeout', '--nvml-timeout=2s'], ['quiet', '-q']],
  status: [['json', '--json'], ['gpus', '--gpus=0'], ['nvml-timeout', '--nvml-timeout=2s'], ['quiet', '-q']],
  holders: [['json', '--json'], ['gpus', '--gpus=0'], ['nvml-timeout', '--nvml-timeout=2s'], ['quiet', '-q']],
};
const DURATION_FLAGS: Record<Command, string[]> = {
  wait: ['timeout', 'interval', 'stable', 'nvml-timeout'],
  check: ['nvml-timeout'],
  status: ['nvml-timeout'],
  holders: ['nvml-timeout'],
};
const OPTION_NAMES = new Set(['gpus', 'library', 'nvml-timeout', 'min-free', 'margin', 'max-used', 'no-processes', 'ignore', 'stable', 'stable-tolerance', 'timeout', 'interval',
  'stale', 'kill-stale', 'kill-grace', 'clean-shm', 'dry-run', 'json', 'format', 'notify', 'report-file', 'quiet', 'verbose', 'help']);

/** One malformed argument vector: what to run, the exit it must give, and words one of which the message must contain. */
interface Malformed {
  kind: string;
  command: Command | null;
  /** Tokens of the malformation, kept together. */
  tokens: string[];
  /** Flag names the valid filler must not repeat (a later duplicate would override the bad value). */
  flag: string | null;
  exit: 64 | 78;
  names: string[];
  /** Whether valid flags may be mixed in. */
  mixable: boolean;
}

function rejects(parse: (text: string) => unknown, text: string): boolean {
  try {
    parse(text);
    return false;
  } catch {
    return true;
  }
}

const anyText = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.string({ maxLength: 12, unit: fc.constantFrom('0', '5', '.', ' ', '%', 'k', 'i', 'B', 'G', 'm', 's', 'h', '-', 'x', ',', '=') }),
);
const word = fc.stringMatching(/^[a-z][a-z0-9-]{0,14}$/);
const command = fc.constantFrom(...COMMANDS);

const malformed: fc.Arbitrary<Malformed> = fc.oneof(
  fc.tuple(command, word.filter((w) => !OPTION_NAMES.has(w))).map(([c, w]): Malformed => ({
    kind: 'unknown option', command: c, tokens: [`--${w}`], flag: null, exit: 64, names: [`'--${w}'`], mixable: true,
  })),
  command.chain((c) => fc.tuple(fc.constant(c), fc.constantFrom(...DURATION_FLAGS[c]), anyText.filter((t) => rejects(parseDuration, t)))).map(([c, flag, value]): Malformed => ({
    kind: 'bad duration', command: c, tokens: [`--${flag}=${value}`], flag, exit: 64, names: [`--${flag}`], mixable: true,
  })),
  command.chain((c) => fc.tuple(fc.constant(c), fc.constantFrom(...DURATION_FLAGS[c]), fc.integer({ min: MAX_DURATION_MS + 1, max: Number.MAX_SAFE_INTEGER }), fc.constantFrom(['ms', 1], ['s', 1000], ['m', 60_000], ['h', 3_600_000]))).map(([c, flag, ms, [unit, size]]): Malformed => ({
    kind: 'duration too long', command: c, tokens: [`--${flag}=${Math.ceil(ms / (size as number))}${unit}`], flag, exit: 64, names: [`--${flag}`], mixable: true,
  })),
  fc.tuple(fc.constantFrom<Command>('wait', 'check'), anyText.filter((t) => rejects(parseSizeOrFraction, t))).map(([c, value]): Malformed => ({
    kind: 'bad fraction or size', command: c, tokens: [`--min-free=${value}`], flag: 'min-free', exit: 64, names: ['--min-free'], mixable: true,
  })),
  fc.tuple(fc.constantFrom<Command>('wait', 'check'), anyText.filter((t) => rejects(parseSizeOrPercentage, t))).map(([c, value]): Malformed => ({
    kind: 'bad size or percentage', command: c, tokens: [`--max-used=${value}`], flag: 'max-used', exit: 64, names: ['--max-used'], mixable: true,
  })),
  fc.tuple(fc.constantFrom<Command>('wait', 'check'), fc.constantFrom('1', '1.0', '100%', '100.0%', '0%', '150%')).map(([c, value]): Malformed => ({
    kind: 'impossible fraction', command: c, tokens: [`--min-free=${value}`], flag: 'min-free', exit: 78, names: ['--min-free'], mixable: true,
  })),
  fc.tuple(fc.constantFrom<Command>('wait', 'check'), anyText.filter((t) => rejects(parseSize, t))).map(([c, value]): Malformed => ({
    kind: 'bad margin', command: c, tokens: ['--min-free=0.5', `--margin=${value}`], flag: 'margin', exit: 64, names: ['--margin'], mixable: true,
  })),
  fc.tuple(fc.constantFrom<Command>('wait'), fc.constantFrom('stable-tolerance'), anyText.filter((t) => rejects(parseSize, t))).map(([c, flag, value]): Malformed => ({
    kind: 'bad size', command: c, tokens: [`--${flag}=${value}`], flag, exit: 64, names: [`--${flag}`], mixable: true,
  })),
  fc.tuple(fc.constantFrom<Command>('wait', 'check'), anyText.filter((t) => !['report', 'fail', 'ignore'].includes(t))).map(([c, value]): Malformed => ({
    kind: 'bad choice', command: c, tokens: [`--stale=${value}`], flag: 'stale', exit: 64, names: ['--stale'], mixable: true,
  })),
  fc.tuple(fc.constantFrom<Command>('status', 'holders'), anyText.filter((t) => !['text', 'json', 'prometheus'].includes(t))).map(([c, value]): Malformed => ({
    kind: 'bad format', command: c, tokens: [`--format=${value}`], flag: 'format', exit: 64, names: ['--format'], mixable: false,
  })),
  command.chain((c) => fc.tuple(fc.constant(c), fc.constantFrom(...DURATION_FLAGS[c], 'gpus'))).map(([c, flag]): Malformed => ({
    kind: 'missing value', command: c, tokens: [`--${flag}`], flag, exit: 64, names: [`--${flag}`], mixable: false,
  })),
  fc.tuple(command, anyText).map(([c, value]): Malformed => ({
    kind: 'value for a boolean flag', command: c, tokens: [`--json=${value}`], flag: 'json', exit: 64, names: ['--json'], mixable: true,
  })),
  fc.tuple(command, fc.string({ minLength: 1, maxLength: 16 }).filter((w) => !w.startsWith('-') && !/[\r\n]/.test(w))).map(([c, w]): Malformed => ({
    kind: 'stray word', command: c, tokens: [w], flag: null, exit: 64, names: [`'${w}'`], mixable: true,
  })),
  fc.string({ minLength: 1, maxLength: 16 }).filter((w) => !KNOWN_WORDS.has(w) && !/[\r\n]/.test(w)).map((w): Malformed => ({
    kind: 'unknown command', command: null, tokens: [w], flag: null, exit: 64, names: [`'${w}'`], mixable: false,
  })),
  fc.tuple(fc.constantFrom<Command>('status', 'holders'), fc.constantFrom('timeout=5s', 'stable=1s', 'min-free=0.9', 'kill-stale', 'stale=report')).map(([c, flag]): Malformed => ({
    kind: 'flag of another command', command: c, tokens: [`--${flag}`], flag: null, exit: 64, names: [`'--${flag.split('=')[0]!}'`], mixable: true,
  })),
  fc.tuple(command, fc.constantFrom(',', ' , ', ',,', ' ')).map(([c, value]): Malformed => ({
    kind: 'empty --gpus', command: c, tokens: [`--gpus=${value}`], flag: 'gpus', exit: 78, names: ['--gpus'], mixable: true,
  })),
  fc.constantFrom<Malformed>(
    { kind: 'conflict', command: 'wait', tokens: ['-q', '-v'], flag: null, exit: 64, names: ['-q'], mixable: false },
    { kind: 'conflict', command: 'status', tokens: ['--json', '--format=prometheus'], flag: null, exit: 64, names: ['--json'], mixable: false },
    { kind: 'conflict', command: 'wait', tokens: ['--dry-run'], flag: null, exit: 64, names: ['--dry-run'], mixable: false },
    { kind: 'conflict', command: 'check', tokens: ['--kill-grace=5s'], flag: null, exit: 64, names: ['--kill-grace'], mixable: false },
    { kind: 'conflict', command: 'wait', tokens: ['--margin=1GiB'], flag: null, exit: 64, names: ['--margin'], mixable: false },
    { kind: 'conflict', command: 'check', tokens: ['--stale=ignore', '--kill-stale'], flag: null, exit: 64, names: ['--stale ignore'], mixable: false },
    { kind: 'conflict', command: 'wait', tokens: ['--interval=0'], flag: null, exit: 64, names: ['--interval'], mixable: false },
    { kind: 'conflict', command: 'wait', tokens: ['--clean-shm=a/b'], flag: null, exit: 64, names: ['--clean-shm'], mixable: false },
  ),
);

/** A whole argument vector: the malformation at a random place among valid flags. */
const vectors: fc.Arbitrary<{ argv: string[]; case: Malformed }> = malformed.chain((m) => {
  if (m.command === null) return fc.constant({ argv: [...m.tokens, '--json'], case: m });
  const pool = m.mixable ? VALID[m.command].filter(([name]) => name !== m.flag) : [];
  return fc.tuple(fc.subarray(pool.map(([, token]) => token)), fc.nat()).map(([filler, at]) => {
    const position = at % (filler.length + 1);
    // A missing value only reads as missing at the end of the line.
    const flags = m.kind === 'missing value' ? [...filler, ...m.tokens] : [...filler.slice(0, position), ...m.tokens, ...filler.slice(position)];
    return { argv: [m.command as string, ...flags], case: m };
  });
});

type Output = { write(text: string): unknown };
type Main = (argv: readonly string[], env?: NodeJS.ProcessEnv, presentation?: { stdout?: Output; stderr?: Output }) => Promise<number>;
let main: Main;

beforeAll(() => {
  // Should a vector ever be valid, it must not reach a real NVML: it would then fail with 69.
  process.env['GPUGATE_NVML_LIBRARY'] = path.join(repoRoot(), 'build', 'no-such-libnvidia-ml.so.1');
  main = (createRequire(__filename)(path.join(repoRoot(), 'dist', 'cli', 'main.js')) as { main: Main }).main;
});

async function runInProcess(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await main(argv, cliEnv(null, { GPUGATE_NVML_LIBRARY: process.env['GPUGATE_NVML_LIBRARY'] }), {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
  });
  return { code, stdout, stderr };
}

function checkRun(run: { code: number | null; stdout: string; stderr: string }, vector: { argv: string[]; case: Malformed }): void {
  const label = `${vector.case.kind}: gpugate ${JSON.stringify(vector.argv)}\nstderr: ${run.stderr}`;
  expect(run.code, label).toBe(vector.case.exit);
  // One logfmt record, a message (msg=); read as a person reads it, one prefix: `gpugate: …`, or
  // `gpugate <command>: …` when the message names its command (never both).
  const records = logLines(run.stderr);
  expect(records.map((record) => Object.keys(record.pairs)), label).toEqual([['msg']]);
  const text = logText(run.stderr);
  const command = vector.argv[0] ?? '';
  expect(text.startsWith('gpugate: ') || text.startsWith(`gpugate ${command}: `), label).toBe(true);
  expect(text, label).not.toMatch(/^gpugate: gpugate/);
  expect(run.stderr.trim().split('\n'), label).toHaveLength(1);
  expect(vector.case.names.some((name) => text.includes(name)), `${label}\nexpected it to name one of ${JSON.stringify(vector.case.names)}`).toBe(true);
  expect(text, label).not.toMatch(/internal error|\n\s+at |TypeError|ReferenceError/);
  // With --json (or --format=json) on a command that takes it: exactly one document stating the exit; else nothing.
  const command0 = COMMAND_NAMES.find((name) => name === vector.argv[0]);
  const takesJson = command0 !== undefined && optionsFor(command0).some((spec) => spec.name === 'json');
  if (takesJson && vector.argv.slice(1).some((word) => word === '--json' || word === '--format=json')) {
    const lines = run.stdout.trim().split('\n');
    expect(lines, label).toHaveLength(1);
    const document = JSON.parse(lines[0] as string) as { command: string; exitCode: number; result: string };
    expect(document, label).toMatchObject({ command: command0, exitCode: vector.case.exit });
    const gated = ['wait', 'check', 'select'].includes(command0);
    const results = !gated ? ['error'] : vector.case.exit === 64 ? ['usage-error'] : ['config-error', 'no-gpu-selected'];
    expect(results, label).toContain(document.result);
  } else {
    expect(run.stdout, label).toBe('');
  }
}

describe('malformed gpugate command lines (property)', () => {
  it('in-process: every malformed vector exits 64 or 78 with one message naming the bad input', async () => {
    printed.push(describeRuns('in-process vectors', IN_PROCESS_RUNS));
    await fc.assert(
      fc.asyncProperty(vectors, async (vector) => {
        checkRun(await runInProcess(vector.argv), vector);
      }),
      fuzzParameters(IN_PROCESS_RUNS),
    );
  }, 120_000);

  it('as a subprocess: a sample of the same vectors gives the same answers from the real command', async () => {
    const { seed, numRuns } = fuzzParameters(SUBPROCESS_RUNS);
    printed.push(describeRuns('subprocess vectors', SUBPROCESS_RUNS));
    const sample = fc.sample(vectors, { seed, numRuns });
    const env = cliEnv(null, { GPUGATE_NVML_LIBRARY: path.join(repoRoot(), 'build', 'no-such-libnvidia-ml.so.1') });
    const queue = [...sample];
    const worker = async (): Promise<void> => {
      for (let vector = queue.shift(); vector !== undefined; vector = queue.shift()) {
        checkRun(await runCli(vector.argv, { env, killAfterMs: 20_000 }), vector);
      }
    };
    await Promise.all([worker(), worker()]);
  }, 120_000);
});
