/**
 * How gpu-validate's step programs (scripts/gpu-validate/*.cjs) judge what they read, on crafted
 * inputs: the edge cases a real host produces that the simulator does not (old nvidia-smi
 * without memory.reserved, v1 memory, '[N/A]' values, a wait that timed out or returned early,
 * a holder in another class, a benchmark that timed out). Each runs the real program as a
 * subprocess and reads the step record it writes.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIB, type StepRecord } from './helpers/gpu-validate-step';

const helpers = resolve(__dirname, '..', 'scripts', 'gpu-validate');

let work: string;
let counter = 0;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'gpu-validate-judging-'));
});

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

function file(content: string | object): string {
  counter += 1;
  const path = join(work, `input-${counter}`);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

function judge(program: string, args: string[]): { record: StepRecord; stdout: string } {
  const out = join(work, `step-${++counter}.json`);
  const run = spawnSync(process.execPath, [join(helpers, program), ...args, '--out', out], { encoding: 'utf8' });
  expect(run.status, run.stderr).toBe(0);
  return { record: JSON.parse(readFileSync(out, 'utf8')) as StepRecord, stdout: run.stdout };
}

function failedChecks(record: StepRecord): string[] {
  return record.checks.filter((c) => !c.ok).map((c) => c.name);
}

/** `gpugate status --json` for one GPU. */
function status(memory: { totalBytes: number; usedBytes: number; reservedBytes: number | null; source: 'v1' | 'v2' }): object {
  return {
    command: 'status',
    library: { path: 'libnvidia-ml.so.1', driverVersion: '570.86.15', nvmlVersion: '12.570.86.15', cudaDriverVersion: '12.8' },
    devices: [{ index: 0, uuid: 'GPU-aaaa', pciBusId: '00000000:1B:00.0', name: 'NVIDIA H200', memory: { ...memory, freeBytes: 0 }, error: null }],
  };
}

describe('identity judging', () => {
  const total = 143771 * MIB;

  it('compares v1 used (reserved included) with an old nvidia-smi that has no memory.reserved', () => {
    const smi = file('index, uuid, pci.bus_id, name, memory.total [MiB], memory.used [MiB]\n0, GPU-aaaa, 00000000:1B:00.0, NVIDIA H200, 143771 MiB, 1012 MiB\n');
    const { record } = judge('identity.cjs', [
      '--status', file(status({ totalBytes: total, usedBytes: 1012 * MIB + 300, reservedBytes: null, source: 'v1' })),
      '--smi', smi, '--used-tolerance-mib', '8', '--pynvml-skip', 'not installed',
      '--smi-note', 'this nvidia-smi does not know memory.reserved',
    ]);
    expect(record.status).toBe('pass');
    expect(record.checks.find((c) => c.name === 'nvidia-smi: GPU 0 used')?.detail).toContain('including reserved');
  });

  it('accepts either kind of used figure when only gpugate knows the reserved amount', () => {
    const smi = file('index, uuid, pci.bus_id, name, memory.total [MiB], memory.used [MiB], memory.reserved [MiB]\n0, GPU-aaaa, 00000000:1B:00.0, NVIDIA H200, 143771 MiB, 1536 MiB, [N/A]\n');
    const args = ['--smi', smi, '--used-tolerance-mib', '8', '--pynvml-skip', 'not installed'];
    const excluding = judge('identity.cjs', ['--status', file(status({ totalBytes: total, usedBytes: 1536 * MIB, reservedBytes: 512 * MIB, source: 'v2' })), ...args]).record;
    expect(excluding.checks.find((c) => c.name === 'nvidia-smi: GPU 0 used')).toMatchObject({ ok: true, detail: expect.stringContaining('excluding reserved') });
    const including = judge('identity.cjs', ['--status', file(status({ totalBytes: total, usedBytes: 1024 * MIB, reservedBytes: 512 * MIB, source: 'v2' })), ...args]).record;
    expect(including.checks.find((c) => c.name === 'nvidia-smi: GPU 0 used')).toMatchObject({ ok: true, detail: expect.stringContaining('including reserved') });
    const neither = judge('identity.cjs', ['--status', file(status({ totalBytes: total, usedBytes: 3000 * MIB, reservedBytes: 512 * MIB, source: 'v2' })), ...args]).record;
    expect(failedChecks(neither)).toEqual(['nvidia-smi: GPU 0 used']);
  });

  it('fails a total that differs by a MiB and a used figure beyond the tolerance, naming both numbers', () => {
    const smi = file('index, uuid, pci.bus_id, name, memory.total [MiB], memory.used [MiB], memory.reserved [MiB]\n0, GPU-aaaa, 0000:1b:00.0, NVIDIA H200, 143770 MiB, 900 MiB, 512 MiB\n');
    const { record, stdout } = judge('identity.cjs', [
      '--status', file(status({ totalBytes: total, usedBytes: 1000 * MIB, reservedBytes: 512 * MIB, source: 'v2' })),
      '--smi', smi, '--used-tolerance-mib', '64', '--pynvml-skip', 'not installed',
    ]);
    expect(record.status).toBe('fail');
    // The short bus id form and the canonical one name the same function.
    expect(failedChecks(record)).toEqual(['nvidia-smi: GPU 0 total', 'nvidia-smi: GPU 0 used']);
    expect(record.summary).toContain('gpugate 1000.0 MiB, nvidia-smi 900.0 MiB');
    expect(stdout).toContain('FAIL nvidia-smi: GPU 0 total');
  });

  it('notes an [N/A] used value (MIG) instead of failing, and fails when pynvml could not read the GPUs', () => {
    const smi = file('index, uuid, pci.bus_id, name, memory.total [MiB], memory.used [MiB], memory.reserved [MiB]\n0, GPU-aaaa, 00000000:1B:00.0, NVIDIA H200, 143771 MiB, [N/A], [N/A]\n');
    const args = ['--status', file(status({ totalBytes: total, usedBytes: 0, reservedBytes: 0, source: 'v2' })), '--smi', smi, '--used-tolerance-mib', '64'];
    const skipped = judge('identity.cjs', [...args, '--pynvml-skip', 'not installed']).record;
    expect(skipped.status).toBe('pass');
    expect(skipped.data.notes).toEqual(expect.arrayContaining([expect.stringContaining('GPU 0 used not compared')]));
    const broken = judge('identity.cjs', [...args, '--pynvml-error', 'pynvml exited 1: nvmlInit failed: Driver Not Loaded']).record;
    expect(failedChecks(broken)).toEqual(['pynvml reads the GPUs']);
  });

  it('compares pynvml to the byte, including the driver version', () => {
    const smi = file('index, uuid, pci.bus_id, name, memory.total [MiB], memory.used [MiB], memory.reserved [MiB]\n0, GPU-aaaa, 00000000:1B:00.0, NVIDIA H200, 143771 MiB, 0 MiB, 512 MiB\n');
    const pynvml = file({
      driverVersion: '570.86.16',
      devices: [{ index: 0, uuid: 'GPU-aaaa', pciBusId: '00000000:1B:00.0', name: 'NVIDIA H200', totalBytes: total - 4096, usedBytes: 0, reservedBytes: 512 * MIB }],
    });
    const { record } = judge('identity.cjs', [
      '--status', file(status({ totalBytes: total, usedBytes: 0, reservedBytes: 512 * MIB, source: 'v2' })),
      '--smi', smi, '--used-tolerance-mib', '64', '--pynvml', pynvml,
    ]);
    expect(failedChecks(record)).toEqual(['pynvml: GPU 0 total', 'pynvml: driver version']);
  });
});

describe('processes judging', () => {
  const holders = (klass: string, usedBytes: number): object => ({
    command: 'holders',
    gpus: [{ index: 0, uuid: 'GPU-aaaa', holders: [{ pid: 4242, class: klass, usedBytes, gpus: [0], reason: 'in another cgroup' }] }],
  });
  const apps = 'gpu_uuid, pid, used_gpu_memory [MiB]\nGPU-aaaa, 4242, 20994 MiB\n';
  const base = ['--pid', '4242', '--gpu-index', '0', '--gpu-uuid', 'GPU-aaaa', '--hold-bytes', String(20480 * MIB), '--tolerance-mib', '4'];

  it('passes an active holder whose memory matches nvidia-smi (context overhead included)', () => {
    const { record } = judge('processes.cjs', ['--holders', file(holders('active', 20994 * MIB + 123)), '--smi-apps', file(apps), ...base]);
    expect(record.status).toBe('pass');
  });

  it('fails a holder classified otherwise, or with memory beyond the tolerance', () => {
    const { record } = judge('processes.cjs', ['--holders', file(holders('foreign', 21000 * MIB)), '--smi-apps', file(apps), ...base]);
    expect(failedChecks(record)).toEqual(['classified active', 'memory matches nvidia-smi']);
    expect(record.summary).toContain('class foreign (in another cgroup)');
  });

  it('fails when gpugate does not list the pid, saying what it listed', () => {
    const { record } = judge('processes.cjs', ['--holders', file({ gpus: [{ index: 0, holders: [] }] }), '--smi-apps', file(apps), ...base]);
    expect(failedChecks(record)).toEqual(['gpugate lists the holder']);
    expect(record.summary).toContain('gpugate lists none');
  });
});

describe('race judging', () => {
  const line = (event: string, extra: string): string =>
    `gpugate: ${event} gpu=0 uuid=GPU-aaaa bus=0000:1b:00.0 used=20GiB free=120GiB need_free=126GiB ${extra} elapsed=1s timeout=2m`;
  const log = [
    'gpugate: nvml library=libnvidia-ml.so.1 driver=570.86.15',
    line('poll', 'holders=4242/python3/active why=memory,unstable'),
    line('waiting', 'holders=4242/python3/active why=memory,unstable'),
    line('poll', 'holders=9/other/active,4242/python3/draining why=memory'),
    line('poll', 'holders=4242/python3/gone why=memory'),
    line('poll', 'unattributed=10GiB why=memory,unstable'),
    line('poll', 'why=memory,unstable'),
    line('poll', 'why=unstable stable_for=1s/2s'),
    'gpugate: poll gpu=1 uuid=GPU-bbbb bus=0000:9b:00.0 used=1GiB holders=4242/python3/active why=memory',
    line('ready', ''),
  ].join('\n');
  const times = (killMs: number, lastHeldMs: number, releasedMs: number | 'none', exitMs: number): string[] => [
    '--pid', '4242', '--gpu-index', '0', '--started-ms', '1000', '--kill-ms', String(killMs), '--last-held-ms', String(lastHeldMs),
    '--released-ms', String(releasedMs), '--exit-ms', String(exitMs),
  ];

  it('reports the states gpugate logged for the holder on that GPU, and the release time', () => {
    const { record } = judge('race.cjs', [
      '--wait-stdout', file({ result: 'ready', exitCode: 0 }), '--wait-stderr', file(log), '--wait-rc', '0', ...times(3000, 3400, 3600, 6100),
    ]);
    expect(record.status).toBe('pass');
    expect(record.data).toMatchObject({ states: ['active', 'draining', 'gone', 'unattributed', 'releasing', 'settling', 'free'], releaseMs: 600, gpugateReturnedAfterKillMs: 3100, exitCode: 0 });
  });

  it('fails a wait that returned before the memory was back, and one that timed out', () => {
    const early = judge('race.cjs', [
      '--wait-stdout', file({ result: 'ready', exitCode: 0 }), '--wait-stderr', file(log), '--wait-rc', '0', ...times(3000, 3400, 3600, 3200),
    ]).record;
    expect(failedChecks(early)).toEqual(['gpugate returned only after the memory was back']);
    const timedOut = judge('race.cjs', [
      '--wait-stdout', file({ result: 'timeout', exitCode: 75 }), '--wait-stderr', file(log), '--wait-rc', '75', ...times(3000, 125000, 'none', 123000),
    ]).record;
    expect(failedChecks(timedOut)).toEqual(['gpugate exit code', 'memory came back (nvidia-smi)']);
    expect(timedOut.summary).toContain('75 (timed out');
  });

  it('fails when gpugate had already returned before the kill or never showed the holder', () => {
    const { record } = judge('race.cjs', [
      '--wait-stdout', file(''), '--wait-stderr', file('gpugate: something else entirely\n'), '--wait-rc', '0', ...times(3000, 3000, 3100, 2500),
    ]);
    expect(failedChecks(record)).toEqual(['gpugate waited while the holder held memory', 'gpugate returned only after the memory was back', 'gpugate saw the holder active', 'gpugate wait --json parses']);
    expect(record.summary).toContain('no -v progress line could be read');
  });
});

describe('latency judging', () => {
  it('fails a benchmark that timed out, with its last words', () => {
    const { record } = judge('latency.cjs', ['--bench', file(''), '--format', 'json', '--bench-rc', '124', '--bench-stderr', file('gpugate: measuring\n')]);
    expect(record.status).toBe('fail');
    expect(record.summary).toContain('exit 124 (timed out): gpugate: measuring');
  });

  it('reports gpugate against nvidia-smi with the ratio of medians', () => {
    const bench = { deviceCount: 8, memoryOnly: { perSnapshot: { samples: 200, medianUs: 95, p99Us: 180 } }, withProcesses: { perSnapshot: { medianUs: 4200 } }, nvidiaSmi: { perRun: { medianUs: 19000 }, error: null } };
    const { record } = judge('latency.cjs', ['--bench', file(bench), '--format', 'json', '--bench-rc', '0', '--bench-stderr', file('')]);
    expect(record.status).toBe('pass');
    expect(record.data).toMatchObject({ gpugateMedianMs: 0.095, nvidiaSmiMedianMs: 19, ratio: 200 });
    expect(record.summary).toContain('gpugate 200x faster');
  });

  it('reports the table lines of a bench without --json', () => {
    const text = [
      'gpugate bench: 8 GPU(s), library /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1, driver 570.86.15',
      'measure                              samples   median      p99      max',
      'gpugate snapshot, memory only            200  95.0 µs   180 µs   300 µs',
      '  per device                             200  11.9 µs  22.5 µs  37.5 µs',
      'nvidia-smi --query-gpu=memory.used       200  19.0 ms  25.0 ms  30.0 ms',
      'ratio: one memory-only snapshot is 200× faster than one nvidia-smi run (medians)',
    ].join('\n');
    const { record } = judge('latency.cjs', ['--bench', file(text), '--format', 'text', '--bench-rc', '0', '--bench-stderr', file('')]);
    expect(record.status).toBe('pass');
    expect(record.summary).toBe('gpugate snapshot, memory only  200  95.0 µs  180 µs  300 µs | nvidia-smi --query-gpu=memory.used  200  19.0 ms  25.0 ms  30.0 ms | ratio: one memory-only snapshot is 200× faster than one nvidia-smi run (medians)');
  });
});
