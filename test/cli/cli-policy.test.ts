/**
 * Unit tests of the CLI's policy pieces with plain inputs: logfmt quoting, journald stream
 * detection, the exit-code mapping, progress rate-limiting (on change or every 10 s), the
 * failure text, Prometheus label escaping and the argument table.
 */
import { openSync, closeSync, fstatSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { ExitCode, exitCodeForError } from '../../src/cli/exit-codes';
import { shortBusId } from '../../src/cli/bus-id';
import { describeGpuFailure, holderName } from '../../src/gate/failure-text';
import type { GpuEvaluation } from '../../src/gate/wait';
import { fakeEvaluation, fakeGpuEvaluation, fakeHolder } from '../helpers/fake-evaluation';
import { isJournalStream } from '../../src/cli/journal-stream';
import { logfmt, logfmtValue } from '../../src/cli/logfmt';
import { Logger } from '../../src/cli/logger';
import { COMMAND_NAMES, OPTION_TABLE, optionsFor } from '../../src/cli/option-table';
import { parseCommandLine } from '../../src/cli/parse-command-line';
import { ProgressReporter, type PollView } from '../../src/cli/progress-reporter';
import { escapeLabelValue } from '../../src/cli/prometheus-text';
import { ConfigError } from '../../src/config-error';
import { DeviceSelectionError } from '../../src/gate/device-selection-error';
import { UsageError } from '../../src/usage-error';
import { GpuWaitTimeoutError } from '../../src/gate/wait-timeout-error';

const GiB = 1024 ** 3;
const work = mkdtempSync(join(tmpdir(), 'gpugate-cli-policy-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('logfmt', () => {
  it('leaves plain values bare and quotes values with spaces, quotes, = or control characters', () => {
    expect(logfmt([['gpu', 6], ['bus', '0000:9b:00.0'], ['ok', true]])).toBe('gpu=6 bus=0000:9b:00.0 ok=true');
    expect(logfmtValue('engine worker')).toBe('"engine worker"');
    expect(logfmtValue('a="b"')).toBe('"a=\\"b\\""');
    // A control character is written as its visible escape, whose backslash is escaped in turn:
    // logfmt parsers read back only \" and \\ (the npm parser reads \n as a plain n).
    expect(logfmtValue('line\nbreak')).toBe('"line\\\\x0abreak"');
    expect(logfmtValue('')).toBe('""');
  });

  it('drops null and undefined pairs', () => {
    expect(logfmt([['a', null], ['b', 1], ['c', undefined]])).toBe('b=1');
  });

  it('never lets a value break the line or the key=value structure', () => {
    fc.assert(fc.property(fc.string(), (text) => {
      const rendered = logfmtValue(text);
      expect(rendered).not.toMatch(/[\n\r]/);
      if (rendered.startsWith('"')) {
        expect(rendered.endsWith('"')).toBe(true);
        expect(rendered.slice(1, -1)).not.toMatch(/(^|[^\\])(\\\\)*"/);
      } else {
        expect(rendered).not.toMatch(/[\s="]/);
      }
    }));
  });
});

describe('isJournalStream', () => {
  it('is true only when JOURNAL_STREAM equals the device and inode of the given fd', () => {
    const fd = openSync(join(work, 'stream'), 'w');
    const other = openSync(join(work, 'other'), 'w');
    try {
      const stat = fstatSync(fd);
      expect(isJournalStream({ JOURNAL_STREAM: `${stat.dev}:${stat.ino}` }, fd)).toBe(true);
      expect(isJournalStream({ JOURNAL_STREAM: `${stat.dev}:${stat.ino}` }, other)).toBe(false);
      expect(isJournalStream({ JOURNAL_STREAM: `${stat.dev}:${stat.ino + 1}` }, fd)).toBe(false);
      expect(isJournalStream({ JOURNAL_STREAM: 'garbage' }, fd)).toBe(false);
      expect(isJournalStream({}, fd)).toBe(false);
    } finally {
      closeSync(fd);
      closeSync(other);
    }
  });
});

describe('exitCodeForError', () => {
  it('maps each library error to its sysexits code', () => {
    expect(exitCodeForError(new UsageError('12XB', 'a size'))).toBe(ExitCode.usage);
    expect(exitCodeForError(new ConfigError('minFree', 'too much'))).toBe(ExitCode.config);
    expect(exitCodeForError(new DeviceSelectionError('9', ['0', '1'], 'no GPU 9'))).toBe(ExitCode.config);
    expect(exitCodeForError(new GpuWaitTimeoutError(1000, null))).toBe(ExitCode.tempFail);
    expect(exitCodeForError(Object.assign(new Error('lost'), { name: 'NvmlError', code: 'NVML_ERROR_GPU_IS_LOST' }))).toBe(ExitCode.unavailable);
    expect(exitCodeForError(Object.assign(new Error('EACCES'), { code: 'EACCES', syscall: 'open' }))).toBe(ExitCode.osError);
    expect(exitCodeForError(new TypeError('x is undefined'))).toBe(ExitCode.software);
    expect(exitCodeForError('a string')).toBe(ExitCode.software);
  });
});

function gpu(overrides: Partial<GpuEvaluation> = {}): GpuEvaluation {
  return fakeGpuEvaluation({
    index: 6,
    uuid: 'GPU-6',
    pciBusId: '00000000:9B:00.0',
    memory: { totalBytes: 96 * GiB, usedBytes: 92 * GiB, freeBytes: 4 * GiB, reservedBytes: 0, source: 'v2' },
    neededFreeBytes: 86 * GiB,
    maxUsedBytes: null,
    stableForMs: 0,
    ok: false,
    reasons: ['memory'],
    holders: [fakeHolder({ pid: 4242, class: 'draining', usedBytes: 92 * GiB, comm: 'VLLM::Worker_TP', cmdline: 'VLLM::Worker_TP6' })],
    unattributedBytes: 0,
    error: null,
    ...overrides,
  });
}

function lines(): { logger: Logger; out: string[] } {
  const out: string[] = [];
  return { logger: new Logger({ journal: false, verbosity: 'normal', sink: { write: (text: string) => out.push(text) } }), out };
}

describe('ProgressReporter', () => {
  const poll = (elapsedMs: number, devices: GpuEvaluation[]): PollView => fakeEvaluation(elapsedMs, devices);

  it('logs a GPU on its first poll, then only when its state changes', () => {
    const { logger, out } = lines();
    const reporter = new ProgressReporter({ logger, timeoutMs: 120_000 });
    reporter.poll(poll(0, [gpu()]));
    reporter.poll(poll(500, [gpu({ memory: { totalBytes: 96 * GiB, usedBytes: 91.9 * GiB, freeBytes: 4.1 * GiB, reservedBytes: 0, source: 'v2' } })]));
    reporter.poll(poll(1000, [gpu()]));
    expect(out).toHaveLength(1);
    expect(out[0]).toBe(`event=waiting gpu=6 uuid=GPU-6 bus=0000:9b:00.0 used=92GiB used_bytes=${92 * GiB} free=4GiB free_bytes=${4 * GiB} need_free=86GiB need_free_bytes=${86 * GiB} holders=4242/VLLM::Worker_TP6/draining why=memory elapsed=0ms elapsed_ms=0 timeout=2m timeout_ms=120000\n`);
    reporter.poll(poll(1500, [gpu({ holders: [] })]));
    expect(out).toHaveLength(2);
    expect(out[1]).toContain('why=memory');
    expect(out[1]).not.toContain('holders=');
  });

  it('repeats an unchanged busy GPU every 10 s, not more often', () => {
    const { logger, out } = lines();
    const reporter = new ProgressReporter({ logger });
    for (let t = 0; t <= 25_000; t += 500) reporter.poll(poll(t, [gpu()]));
    expect(out).toHaveLength(3);
    expect(out[1]).toContain('elapsed=10s');
    expect(out[2]).toContain('elapsed=20s');
  });

  it('logs a memory drain as it happens (a tenth of the GPU at a time)', () => {
    const { logger, out } = lines();
    const reporter = new ProgressReporter({ logger });
    const used = [92, 91.5, 60, 59, 30, 5];
    used.forEach((gib, i) => reporter.poll(poll(i * 500, [gpu({ memory: { totalBytes: 96 * GiB, usedBytes: gib * GiB, freeBytes: (96 - gib) * GiB, reservedBytes: 0, source: 'v2' } })])));
    expect(out.map((line) => /used=(\S+)/.exec(line)?.[1])).toEqual(['92GiB', '60GiB', '30GiB', '5GiB']);
  });

  it('says when a GPU becomes ready, and logs each stale holder once at warning priority', () => {
    const out: string[] = [];
    const logger = new Logger({ journal: true, verbosity: 'normal', sink: { write: (text: string) => out.push(text) } });
    const reporter = new ProgressReporter({ logger });
    const orphan = fakeHolder({ pid: 77, class: 'orphan', usedBytes: GiB, comm: 'sleep', cmdline: 'VLLM::Worker_TP1 60', reason: 'reparented' });
    reporter.poll(poll(0, [gpu({ holders: [orphan] })]));
    reporter.poll(poll(500, [gpu({ holders: [orphan] })]));
    reporter.poll(poll(1000, [gpu({ ok: true, reasons: [], holders: [] })]));
    expect(out.filter((line) => line.startsWith('<4>event=stale gpu=6 pid=77 class=orphan name=VLLM::Worker_TP1 '))).toHaveLength(1);
    expect(out.at(-1)).toMatch(/^<6>event=ready gpu=6 /);
  });

  it('publishes a short STATUS text when something changes', () => {
    const statuses: string[] = [];
    const { logger } = lines();
    const reporter = new ProgressReporter({ logger, timeoutMs: 60_000, onStatus: (text) => statuses.push(text) });
    reporter.poll(poll(0, [gpu()]));
    reporter.poll(poll(500, [gpu()]));
    expect(statuses).toEqual(['waiting: GPU 6 memory 92GiB used held by 4242/VLLM::Worker_TP6/draining (0ms/1m)']);
  });

  it('is silent with -q except for failures', () => {
    const out: string[] = [];
    const logger = new Logger({ journal: false, verbosity: 'quiet', sink: { write: (text: string) => out.push(text) } });
    const reporter = new ProgressReporter({ logger });
    reporter.poll(poll(0, [gpu()]));
    reporter.logLastState('timeout');
    expect(out).toEqual([expect.stringMatching(/^event=timeout gpu=6 /)]);
  });
});

describe('describeGpuFailure', () => {
  it('names the criterion, the numbers and the holders', () => {
    expect(describeGpuFailure(gpu())).toBe('GPU 6 (GPU-6): free 4GiB < needed 86GiB; held by 4242/VLLM::Worker_TP6/draining');
    expect(describeGpuFailure(gpu({ holders: [], unattributedBytes: 92 * GiB }))).toContain('92GiB held by no listed process');
  });
});

describe('holder names and bus ids', () => {
  it('prefer the process title over comm, and keep a path\'s file name', () => {
    expect(holderName(fakeHolder({ pid: 1, class: 'active', usedBytes: null, comm: 'python3', cmdline: '/usr/bin/python3 -m vllm' }))).toBe('python3');
    expect(holderName(fakeHolder({ pid: 1, class: 'active', usedBytes: null, comm: 'VLLM::Worker_TP', cmdline: 'VLLM::Worker_TP6' }))).toBe('VLLM::Worker_TP6');
    expect(holderName(fakeHolder({ pid: 1, class: 'gone', usedBytes: null, comm: null, cmdline: null }))).toBe('?');
  });

  it('writes bus ids as sysfs does', () => {
    expect(shortBusId('00000000:9B:00.0')).toBe('0000:9b:00.0');
    expect(shortBusId('0000:1b:00.0')).toBe('0000:1b:00.0');
  });
});

describe('Prometheus label values', () => {
  it('escape backslash, quote and newline', () => {
    expect(escapeLabelValue('a\\b"c\nd')).toBe('a\\\\b\\"c\\nd');
  });
});

describe('the option table', () => {
  it('gives every command --help and documents every flag', () => {
    for (const command of COMMAND_NAMES) expect(optionsFor(command).map((spec) => spec.name)).toContain('help');
    for (const spec of OPTION_TABLE) expect(spec.help.length).toBeGreaterThan(10);
    expect(new Set(OPTION_TABLE.map((spec) => spec.name)).size).toBe(OPTION_TABLE.length);
  });

  it('splits the wrapped command at the first --, keeping later -- for CMD', () => {
    const parsed = parseCommandLine(['wait', '--timeout', '5s', '--', 'sh', '-c', 'x', '--', '--json']);
    expect(parsed).toMatchObject({ kind: 'command', command: 'wait', values: { timeout: '5s' }, wrapped: ['sh', '-c', 'x', '--', '--json'] });
  });

  it('collects repeatable flags', () => {
    const parsed = parseCommandLine(['check', '--ignore', '123', '--ignore', 'dcgm', '--clean-shm', 'nccl-*']);
    expect(parsed).toMatchObject({ values: { ignore: ['123', 'dcgm'], 'clean-shm': ['nccl-*'] } });
  });
});
