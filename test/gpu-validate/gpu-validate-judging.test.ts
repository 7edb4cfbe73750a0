/**
 * How gpu-validate's step programs (scripts/gpu-validate/*.cjs) judge what they read, on crafted
 * inputs: the edge cases a real host produces that the simulator does not (old nvidia-smi
 * without memory.reserved, v1 memory, '[N/A]' values, a wait that timed out or returned early,
 * a holder in another class, a benchmark that timed out). Each runs the real program as a
 * subprocess and reads the step record it writes. The doctor and select steps judge documents
 * the built CLI printed against the simulator (healthy, degraded, a lost GPU, failing and hung
 * health queries, no NVML, busy GPUs, real leases), and copies of them broken in one place.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Ajv from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEnv, runCli, type CliRun } from '../helpers/cli';
import { MIB, type StepRecord } from '../helpers/gpu-validate-step';
import { bundledScenario, simDevice, simLibraryFor, simNvmlDir, writeScenario } from '../helpers/sim';

const helpers = resolve(__dirname, '..', '..', 'scripts', 'gpu-validate');
const schemas = resolve(__dirname, '..', '..', 'schemas');

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

/** The CLI on a simulated host: `args` with `scenario` (null: no scenario) and `extra` environment. */
async function cli(args: string[], scenario: string | null, extra: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  const library = scenario === null ? {} : { GPUGATE_NVML_LIBRARY: simLibraryFor(scenario) };
  return runCli(args, { env: cliEnv(scenario, { ...library, ...extra }), killAfterMs: 60_000 });
}

/** `gpugate doctor --json` on the scenario (an empty kernel log: the host's own is not the subject). */
async function doctorRun(scenario: string | null, extra: NodeJS.ProcessEnv = {}, args: string[] = []): Promise<CliRun> {
  return cli(['doctor', '--json', '--kernel-log', file(''), ...args], scenario, extra);
}

/** Judges a doctor run as the script does; `status` is a `gpugate status --json` file. */
function judgeDoctor(run: { stdout: string; stderr: string; code: number | null }, status?: string): StepRecord {
  return judge('doctor.cjs', ['--doctor', file(run.stdout), '--doctor-rc', String(run.code), '--doctor-stderr', file(run.stderr), '--schemas', schemas,
    ...(status === undefined ? [] : ['--status', status])]).record;
}

function judgeSelect(step: string, run: { stdout: string; stderr: string; code: number | null }, extra: string[] = []): StepRecord {
  return judge('select.cjs', ['--step', step, '--select', file(run.stdout), '--select-rc', String(run.code), '--select-stderr', file(run.stderr), '--schemas', schemas,
    '--count', '1', ...extra]).record;
}

interface DoctorDocument { exitCode: number; checks: Array<{ id: string; subject: string; status: string; evidence: Record<string, unknown> }> }

/** A copy of a real run whose document `edit` changed. */
function edited(run: CliRun, edit: (doc: DoctorDocument & Record<string, unknown>) => void): CliRun {
  const doc = JSON.parse(run.stdout) as DoctorDocument & Record<string, unknown>;
  edit(doc);
  return { ...run, stdout: JSON.stringify(doc) };
}

const healthIds = ['gpu.mig-mode', 'gpu.remapped-rows', 'gpu.ecc-errors', 'gpu.retired-pages', 'gpu.clock-events', 'gpu.pcie-link', 'gpu.fabric'];

describe('doctor judging', () => {
  const twoGpus = (): string => writeScenario({ devices: [simDevice(0), simDevice(1)] });

  it('passes a healthy host, whatever doctor concluded, and records each GPU\'s readings and NVML codes', async () => {
    const scenario = twoGpus();
    const run = await doctorRun(scenario);
    expect([0, 69, 75]).toContain(run.code);
    const status = await cli(['status', '--json'], scenario);
    const record = judgeDoctor(run, file(status.stdout));
    expect(record.status, record.summary).toBe('pass');
    expect(record.checks.map((c) => c.name)).toEqual(expect.arrayContaining([
      'gpugate doctor --json matches schemas/doctor.schema.json', 'doctor sees the GPUs gpugate status lists', 'GPU 0 health read or NVML code', 'GPU 1 health read or NVML code',
    ]));
    const health = record.data.health as Array<{ index: number; read: string[]; nvmlCodes: Record<string, string> }>;
    expect(health.map((h) => h.index)).toEqual([0, 1]);
    // Every health check rests on a reading or on the code NVML gave.
    for (const h of health) expect([...h.read, ...Object.keys(h.nvmlCodes)].sort()).toEqual([...healthIds].sort());
    expect(record.summary).toMatch(new RegExp(`^exit ${run.code} \\((pass|warn|fail)\\): \\d+ checks, .*2 GPU\\(s\\) checked`));
  });

  it('records the findings of a degraded host (exit 69) as a result, not a failure of the step', async () => {
    const run = await doctorRun(bundledScenario('degraded-host'));
    expect(run.code).toBe(69);
    const record = judgeDoctor(run);
    expect(record.status, record.summary).toBe('pass');
    expect(record.data).toMatchObject({ exitCode: 69, result: 'fail', gpuCount: 8 });
    const findings = record.data.findings as Array<{ id: string; subject: string; status: string }>;
    expect(findings).toEqual(expect.arrayContaining([
      expect.objectContaining({ id: 'gpu.remapped-rows', status: 'fail', subject: expect.stringMatching(/^GPU 2 /) }),
      expect.objectContaining({ id: 'gpu.mig-mode', status: 'warn', subject: expect.stringMatching(/^GPU 1 /) }),
    ]));
    expect(record.summary).toContain('findings: ');
  });

  it('accepts NVML error codes for the readings, and a lost GPU that says why it does not answer', async () => {
    const faulty = writeScenario({
      devices: [simDevice(0, { remappedRows: null }), simDevice(1)],
      faults: [{ function: 'nvmlDeviceGetCurrentClocksEventReasons', device: 1, return: 4 }, { function: 'nvmlDeviceGetTotalEccErrors', device: 1, return: 15 }],
    });
    const record = judgeDoctor(await doctorRun(faulty));
    expect(record.status, record.summary).toBe('pass');
    const health = record.data.health as Array<{ nvmlCodes: Record<string, string> }>;
    expect(health[0]?.nvmlCodes['gpu.remapped-rows']).toBe('NVML_ERROR_NOT_SUPPORTED');
    expect(health[1]?.nvmlCodes).toMatchObject({ 'gpu.clock-events': 'NVML_ERROR_NO_PERMISSION', 'gpu.ecc-errors': 'NVML_ERROR_GPU_IS_LOST' });

    const lost = judgeDoctor(await doctorRun(bundledScenario('lost-gpu')));
    expect(lost.status, lost.summary).toBe('pass');
    expect(lost.checks.find((c) => c.name === 'GPU 5 health read or NVML code')?.detail).toBe('does not answer NVML (NVML_ERROR_GPU_IS_LOST): its health is not read');
  });

  it('fails when the health query itself did not answer (a hung call), naming the stuck function', async () => {
    const scenario = writeScenario({ devices: [simDevice(0), simDevice(1)], faults: [{ function: 'nvmlDeviceGetRemappedRows', device: 1, hang: true }] });
    const record = judgeDoctor(await doctorRun(scenario, {}, ['--nvml-timeout', '500ms']));
    expect(failedChecks(record)).toEqual(['GPU 1 health read or NVML code']);
    expect(record.summary).toContain('the health query failed: GPUGATE_TIMEOUT in nvmlDeviceGetRemappedRows');
  });

  it('accepts a host whose NVML does not open, unless gpugate status read GPUs there', async () => {
    const scenario = twoGpus();
    const run = await doctorRun(null, { GPUGATE_NVML_LIBRARY: join(work, 'no-such-libnvidia-ml.so.1') });
    expect(run.code).toBe(69);
    const alone = judgeDoctor(run);
    expect(alone.status, alone.summary).toBe('pass');
    expect(alone.data.findings).toEqual(expect.arrayContaining([expect.objectContaining({ id: 'driver.nvml', status: 'fail' })]));
    const status = await cli(['status', '--json'], scenario);
    expect(failedChecks(judgeDoctor(run, file(status.stdout)))).toEqual(['doctor sees the GPUs gpugate status lists']);
  });

  it('fails a health check left without reading or code, a missing one, and a GPU without its checks', async () => {
    const run = await doctorRun(twoGpus());
    const emptied = judgeDoctor(edited(run, (doc) => {
      const check = doc.checks.find((c) => c.id === 'gpu.pcie-link' && c.subject.startsWith('GPU 1 '));
      if (check !== undefined) check.evidence = {};
    }));
    expect(failedChecks(emptied)).toEqual(['GPU 1 health read or NVML code']);
    expect(emptied.summary).toMatch(/gpu\.pcie-link: neither a reading \(generation, maxGeneration, width, maxWidth missing\) nor an NVML code/);
    const dropped = judgeDoctor(edited(run, (doc) => {
      doc.checks = doc.checks.filter((c) => !(c.id === 'gpu.fabric' && c.subject.startsWith('GPU 0 ')));
    }));
    expect(dropped.summary).toContain('gpu.fabric: no such check');
    const coded = judgeDoctor(edited(run, (doc) => {
      const check = doc.checks.find((c) => c.id === 'gpu.ecc-errors' && c.subject.startsWith('GPU 0 '));
      if (check !== undefined) check.evidence = { code: 'GPUGATE_NATIVE_FAILURE' };
    }));
    expect(coded.summary).toContain('gpu.ecc-errors: code GPUGATE_NATIVE_FAILURE is not an NVML error code');
    const noGpu1 = judgeDoctor(edited(run, (doc) => {
      doc.checks = doc.checks.filter((c) => !c.subject.startsWith('GPU 1 '));
    }));
    expect(failedChecks(noGpu1)).toEqual(['every GPU has its checks']);
  });

  it('fails a crash, exit 70, output that is not JSON, a document off its schema, and a wrong result', async () => {
    const run = await doctorRun(twoGpus());
    const crashed = judgeDoctor({ stdout: '', stderr: 'TypeError: cannot read properties of undefined\n', code: 1 });
    expect(failedChecks(crashed)).toEqual(['gpugate doctor --json exit code', 'gpugate doctor --json parses']);
    expect(crashed.summary).toContain('exit 1 (expected one of 0, 75, 69): TypeError: cannot read properties of undefined');
    const seventy = judgeDoctor({ ...run, code: 70 });
    expect(failedChecks(seventy)).toEqual(['gpugate doctor --json exit code', 'gpugate doctor --json states its exit code']);
    expect(seventy.summary).toContain('exit 70 (gpugate internal error)');
    const text = judgeDoctor({ ...run, stdout: 'driver\n  pass  NVML initialised\n' });
    expect(failedChecks(text)).toEqual(['gpugate doctor --json parses']);
    const offSchema = judgeDoctor(edited(run, (doc) => {
      const check = doc.checks[0];
      if (check !== undefined) check.status = 'unknown';
    }));
    expect(failedChecks(offSchema)).toEqual(['gpugate doctor --json matches schemas/doctor.schema.json']);
    expect(offSchema.summary).toContain('$.checks[0].status: "unknown" is not one of "pass", "warn", "fail"');
    const wrongResult = judgeDoctor(edited(run, (doc) => {
      doc['result'] = doc['result'] === 'pass' ? 'fail' : 'pass';
    }));
    expect(failedChecks(wrongResult)).toEqual(['result is the worst check']);
  });
});

describe('select judging', () => {
  const idle = (): string => writeScenario({ devices: [simDevice(0), simDevice(1)] });

  it('passes --no-lease and a real lease in a lease directory, held by the given process', async () => {
    const scenario = idle();
    const status = file((await cli(['status', '--json'], scenario)).stdout);
    const unleased = await cli(['select', '--count', '1', '--no-lease', '--json'], scenario);
    expect(unleased.code).toBe(0);
    const record = judgeSelect('select', unleased, ['--status', status]);
    expect(record.status, record.summary).toBe('pass');
    expect(record.data).toMatchObject({ exitCode: 0, result: 'selected', chosen: [{ index: 0, uuid: 'GPU-7e570000-0000-4000-8000-000000000000', lease: null }] });
    expect(record.summary).toBe('exit 0: GPUs 0 selected, not leased (2 of 2 eligible)');

    const leases = mkdtempSync(join(work, 'leases-'));
    const leased = await cli(['select', '--count', '1', '--lease-pid', String(process.pid), '--json'], scenario, { GPUGATE_LEASE_DIR: leases });
    expect(leased.code, leased.stderr).toBe(0);
    const args = ['--status', status, '--lease-dir', leases, '--lease-pid', String(process.pid)];
    const leasedRecord = judgeSelect('select-lease', leased, args);
    expect(leasedRecord.status, leasedRecord.summary).toBe('pass');
    expect(leasedRecord.checks.map((c) => c.name)).toEqual(expect.arrayContaining(['GPU 0 leased in the lease directory', `GPU 0 lease held by pid ${process.pid}`, 'GPU 0 lease record written']));
    // The same lease judged as if another process held it, or after its record went away.
    expect(failedChecks(judgeSelect('select-lease', leased, [...args.slice(0, -1), '1']))).toEqual(['GPU 0 lease held by pid 1']);
    expect(failedChecks(judgeSelect('select', leased, ['--status', status]))).toEqual(['no lease taken (--no-lease)']);
    for (const name of readdirSync(leases).filter((n) => n.endsWith('.lease'))) unlinkSync(join(leases, name));
    expect(failedChecks(judgeSelect('select-lease', leased, args))).toEqual(['GPU 0 lease record written']);
  });

  it('records busy GPUs (exit 75) as a result, with the reason', async () => {
    const busy = writeScenario({ devices: [0, 1].map((i) => simDevice(i, { memory: { totalBytes: 97887 * MIB, reservedBytes: 471 * MIB, usedBytes: 40960 * MIB } })) });
    const run = await cli(['select', '--count', '1', '--no-lease', '--json'], busy);
    expect(run.code).toBe(75);
    const record = judgeSelect('select', run, ['--status', file((await cli(['status', '--json'], busy)).stdout)]);
    expect(record.status, record.summary).toBe('pass');
    expect(record.checks.find((c) => c.name === 'fewer eligible than asked for')).toMatchObject({ ok: true, detail: '0 of 2 eligible' });
    expect(record.summary).toMatch(/^exit 75 \(busy\): /);
  });

  it('accepts exit 69 only where gpugate status could not read the GPUs either', async () => {
    const run = await cli(['select', '--count', '1', '--no-lease', '--json'], null, { GPUGATE_NVML_LIBRARY: join(work, 'no-such-libnvidia-ml.so.1') });
    expect(run.code).toBe(69);
    expect(judgeSelect('select', run).status).toBe('pass');
    const status = file((await cli(['status', '--json'], idle())).stdout);
    expect(failedChecks(judgeSelect('select', run, ['--status', status]))).toEqual(['gpugate select --json exit code']);
  });

  it('fails a CUDA_VISIBLE_DEVICES that is not the chosen UUIDs, a chosen GPU that was not eligible, and a count unlike --count', async () => {
    const run = await cli(['select', '--count', '1', '--no-lease', '--json'], idle());
    const doc = JSON.parse(run.stdout) as { cudaVisibleDevices: string; candidates: Array<{ eligible: boolean }> };
    const broken = { ...doc, cudaVisibleDevices: '0', candidates: doc.candidates.map((c, i) => (i === 0 ? { ...c, eligible: false } : c)) };
    const record = judgeSelect('select', { ...run, stdout: JSON.stringify(broken) });
    expect(failedChecks(record)).toEqual(['CUDA_VISIBLE_DEVICES names the chosen UUIDs', 'GPU 0 is an eligible candidate']);
    const two = judge('select.cjs', ['--step', 'select', '--select', file(run.stdout), '--select-rc', '0', '--select-stderr', file(''), '--schemas', schemas, '--count', '2']).record;
    expect(failedChecks(two)).toEqual(['count as asked', '2 GPU(s) chosen']);
  });
});

describe('the schema checker of the step programs', () => {
  const { validate, loadSchemas } = require(join(helpers, 'json-schema.cjs')) as {
    validate: (doc: unknown, dir: string, id: string) => string[];
    loadSchemas: (dir: string) => Map<string, Record<string, unknown>>;
  };

  it('applies every shipped schema, and agrees with ajv on real documents and on copies broken in one place', async () => {
    const loaded = loadSchemas(schemas);
    expect([...loaded.keys()]).toEqual(expect.arrayContaining(['urn:gpugate:schema:doctor', 'urn:gpugate:schema:select', 'urn:gpugate:schema:common']));
    const ajv = new Ajv({ allErrors: true, strict: true, strictTypes: false });
    for (const schema of loaded.values()) ajv.addSchema(schema);
    const scenario = writeScenario({ devices: [simDevice(0), simDevice(1)] });
    const documents: Array<[string, Record<string, unknown>]> = [
      ['doctor', JSON.parse((await doctorRun(scenario)).stdout) as Record<string, unknown>],
      ['select', JSON.parse((await cli(['select', '--count', '1', '--no-lease', '--json'], scenario)).stdout) as Record<string, unknown>],
      ['status', JSON.parse((await cli(['status', '--json'], scenario)).stdout) as Record<string, unknown>],
    ];
    const breakages: Array<(doc: Record<string, unknown>) => void> = [
      () => undefined,
      (doc) => { delete doc['exitCode']; },
      (doc) => { doc['schemaVersion'] = '2.0'; },
      (doc) => { doc['command'] = 42; },
      (doc) => { doc['library'] = { path: '/x' }; },
    ];
    for (const [command, doc] of documents) {
      const id = `urn:gpugate:schema:${command}`;
      for (const [i, breakage] of breakages.entries()) {
        const copy = structuredClone(doc);
        breakage(copy);
        const ours = validate(copy, schemas, id);
        expect(ours.length === 0, `${command}, breakage ${i}: ${ours.join('; ')}`).toBe(ajv.validate(id, copy));
        expect(ours.length === 0).toBe(i === 0);
      }
    }
  });

  it('refuses a schema keyword it does not implement rather than pass what it cannot check', () => {
    const dir = mkdtempSync(join(work, 'schemas-'));
    writeFileSync(join(dir, 'x.schema.json'), JSON.stringify({ $id: 'urn:x', type: 'object', properties: { a: { type: 'string', maxLength: 3 } } }));
    expect(() => validate({ a: 'long' }, dir, 'urn:x')).toThrow(/x\.schema\.json\/properties\/a: schema keyword "maxLength" is not supported/);
  });
});

describe('driver-abi: the library against the simulator profile of its version', () => {
  const table = resolve(__dirname, '..', '..', 'sim', 'profile-table.cjs');
  const names = (): string => {
    const { readProfileTable } = require(table) as { readProfileTable(): { symbols: Array<{ name: string }> } };
    return file(readProfileTable().symbols.map((s) => s.name).join('\n'));
  };
  const abi = (facts: string, extra: string[] = []): StepRecord =>
    judge('driver-abi.cjs', ['--facts', facts, '--facts-rc', '0', '--facts-stderr', file(''), '--table', table, ...extra]).record;

  it('reads the simulator of mig.json through ctypes and finds what it imitates: utilisation NOT_SUPPORTED in MIG mode', () => {
    const scenario = bundledScenario('mig');
    const libDir = simNvmlDir('current');
    const read = spawnSync('python3', [join(helpers, 'driver-abi.py'), names()], {
      encoding: 'utf8', env: { ...process.env, GPUGATE_SIM_SCENARIO: scenario, LD_LIBRARY_PATH: libDir },
    });
    expect(read.status, read.stderr).toBe(0);
    const facts = JSON.parse(read.stdout) as { devices: Array<{ migMode: number[]; utilization: number[]; driverModelV2: number[]; addressingMode: number[] }> };
    expect(facts.devices[0]).toMatchObject({ migMode: [0, 1, 1], utilization: [3, 0, 0], driverModelV2: [3, 99, 99], addressingMode: [0, 0] });
    expect(facts.devices[1]?.utilization[0]).toBe(0);
    const record = abi(file(read.stdout));
    expect(record.status, record.summary).toBe('pass');
    expect(record.checks.map((c) => c.name)).toEqual(['profile exports', 'CUDA version', 'NVML version', 'GPU 0 utilization in MIG mode']);
  });

  it('fails a profile that exports what the driver lacks, a wrong CUDA version, and utilisation answered in MIG mode', () => {
    const symbols = Object.fromEntries(readFileSync(names(), 'utf8').split('\n').map((n) => [n, n !== 'nvmlDeviceGetConfComputeMemSizeInfo']));
    const facts = file({
      libraryPath: '/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1', driverVersion: '535.54.03', nvmlVersion: '12.535.54.03', cudaDriverVersion: 12010, symbols,
      devices: [{ index: 0, migMode: [0, 1, 1], utilization: [0, 0, 0], driverModelV2: [3, 99, 99], addressingMode: [null, 99] }],
    });
    const nm = file('0000000000001000 T nvmlDeviceGetSomethingNew\n0000000000002000 T nvmlInit_v2\n');
    const record = abi(facts, ['--nm', nm]);
    expect(record.status).toBe('fail');
    expect(failedChecks(record)).toEqual(['profile exports', 'CUDA version', 'GPU 0 utilization in MIG mode']);
    expect(record.summary).toContain('the r535-early profile exports 1 function(s) this driver lacks: nvmlDeviceGetConfComputeMemSizeInfo');
    expect(record.summary).toContain('the driver reports 12010; the simulator derives 12020 for 535.54.03');
    expect((record.data as { beyondProfile: string[]; unknownToTable: string[] }).unknownToTable).toEqual(['nvmlDeviceGetSomethingNew']);
    // Every later function of the table that this driver has is listed as beyond the profile.
    expect((record.data as { beyondProfile: string[] }).beyondProfile).toContain('nvmlDeviceGetRunningProcessDetailList');
  });
});

describe('driver judging (the open questions a real run answers)', () => {
  const MiB = 1024 * 1024;
  /** driver-facts.py's document for one GPU, with `gpu` overriding its fields. */
  const facts = (gpu: Record<string, unknown> = {}, cuda: Record<string, unknown> = { available: false, reason: 'libcuda.so.1 not loadable' }): object => ({
    driverVersion: '525.60.13',
    nestedPidNamespace: false,
    gpu: 0,
    gpus: [{
      index: 0,
      memory: {
        v1: { totalBytes: 46068 * MiB, freeBytes: 45499 * MiB, usedBytes: 569 * MiB },
        v2: { totalBytes: 46068 * MiB, reservedBytes: 569 * MiB, freeBytes: 45499 * MiB, usedBytes: 569 * MiB, semantics: 'used-includes-reserved' },
      },
      processList: { symbol: 'nvmlDeviceGetComputeRunningProcesses_v3', readable: true, code: 'SUCCESS', count: 0, firstMemoryNotAvailable: null },
      recoveryAction: { value: 0, action: 'none' },
      ...gpu,
    }],
    cuda,
  });
  const gateJson = (reservedInUsed: boolean | null): object => ({ command: 'check', gpus: [{ index: 0, reservedInUsed }] });
  const judgeFacts = (document: object, options: { rc?: number; check?: object; stderr?: string } = {}): { record: StepRecord; stdout: string } =>
    judge('driver-facts.cjs', [
      '--facts', file(document), '--facts-rc', String(options.rc ?? 0), '--facts-stderr', file(options.stderr ?? ''),
      ...(options.check === undefined ? [] : ['--check', file(options.check)]),
    ]);

  it('records a driver with the R525 semantics, and passes when gpugate reads them the same way', () => {
    const { record, stdout } = judgeFacts(facts(), { check: gateJson(true) });
    expect(record.status).toBe('pass');
    expect(record.summary).toBe('driver 525.60.13: v2 used-includes-reserved; 1 GPU(s) read');
    expect(stdout).toMatch(/note GPU 0: v2 memory semantics used-includes-reserved/);
    expect(stdout).toMatch(/note GPU 0: recovery action none \(0\)/);
  });

  it('fails when gpugate reads other semantics than the driver, or the reading fits neither', () => {
    expect(failedChecks(judgeFacts(facts(), { check: gateJson(false) }).record)).toEqual(['GPU 0 gpugate reads the same semantics']);
    const neither = facts({ memory: { v1: {}, v2: { totalBytes: 46068 * MiB, reservedBytes: 569 * MiB, freeBytes: 40000 * MiB, usedBytes: 0, semantics: 'neither' } } });
    expect(failedChecks(judgeFacts(neither).record)).toEqual(['GPU 0 memory reading adds up']);
  });

  it('notes unreadable process lists gpugate explains, and fails a code it does not', () => {
    const denied = judgeFacts(facts({ processList: { symbol: 'nvmlDeviceGetComputeRunningProcesses_v3', readable: false, code: 'NVML_ERROR_NO_PERMISSION' } }));
    expect(denied.record.status).toBe('pass');
    expect(denied.stdout).toMatch(/process list unreadable: NVML_ERROR_NO_PERMISSION/);
    const odd = judgeFacts(facts({ processList: { symbol: 'nvmlDeviceGetComputeRunningProcesses_v3', readable: false, code: 'NVML_ERROR_UNKNOWN' } }));
    expect(failedChecks(odd.record)).toEqual(['GPU 0 process list answers a code gpugate explains']);
  });

  it('records a pending recovery action by name, and fails an undocumented value', () => {
    const reset = judgeFacts(facts({ recoveryAction: { value: 1, action: 'gpu-reset' } }));
    expect(reset.record.status).toBe('pass');
    expect(reset.stdout).toMatch(/recovery action gpu-reset \(1\)/);
    expect(failedChecks(judgeFacts(facts({ recoveryAction: { value: 9, action: 'unknown-9' } })).record)).toEqual(['GPU 0 recovery action is a documented one']);
    expect(judgeFacts(facts({ recoveryAction: { error: 'NVML_ERROR_INVALID_ARGUMENT' } })).record.status).toBe('pass');
  });

  it('fails when gpugate\'s check does not act on the driver\'s recovery action, or refuses a GPU that needs none', () => {
    const refused = { command: 'check', result: 'unavailable', exitCode: 69, error: { code: 'GPUGATE_RECOVERY_REQUIRED' } };
    const reset = facts({ recoveryAction: { value: 1, action: 'gpu-reset' } });
    expect(judgeFacts(reset, { check: refused }).record.status).toBe('pass');
    expect(failedChecks(judgeFacts(reset, { check: gateJson(true) }).record)).toEqual(['GPU 0 gpugate acts on the recovery action']);
    expect(failedChecks(judgeFacts(facts(), { check: refused }).record)).toEqual(['GPU 0 gpugate acts on the recovery action']);
  });

  it('records CUDA\'s total against NVML\'s and what one context costs', () => {
    const cuda = {
      available: true, cudaTotalBytes: 97247 * MiB, cudaDeviceTotalBytes: 97247 * MiB, cudaFreeWithContextBytes: 96134 * MiB,
      nvmlTotalBytes: 97887 * MiB, nvmlTotalMinusReservedBytes: 97247 * MiB, nvmlFreeBeforeContextBytes: 97244 * MiB, nvmlFreeWithContextBytes: 96689 * MiB, contextBytes: 555 * MiB,
    };
    const { stdout } = judgeFacts(facts({}, cuda));
    expect(stdout).toMatch(/CUDA total 97247\.0 MiB, NVML total 97887\.0 MiB \(equal to NVML total - reserved\)/);
    expect(stdout).toMatch(/one CUDA context takes 555\.0 MiB of NVML's free memory/);
  });

  it('checks gpugate\'s --for vllm total against CUDA\'s, and notes a context larger than its estimate', () => {
    const cuda = {
      available: true, cudaTotalBytes: 97247 * MiB, cudaDeviceTotalBytes: 97247 * MiB, cudaFreeWithContextBytes: 96134 * MiB,
      nvmlTotalBytes: 97887 * MiB, nvmlTotalMinusReservedBytes: 97247 * MiB, nvmlFreeBeforeContextBytes: 97244 * MiB, nvmlFreeWithContextBytes: 96589 * MiB, contextBytes: 655 * MiB,
    };
    const view = (cudaTotalBytes: number): object => ({ command: 'check', gpus: [{ index: 0, reservedInUsed: true, engineView: { engine: 'vllm', utilization: 0.01, contextBytes: 555 * MiB, cudaFreeBytes: 96689 * MiB, cudaTotalBytes, requestedBytes: 973 * MiB, ok: true } }] });
    const agreed = judgeFacts(facts({}, cuda), { check: view(97247 * MiB) });
    expect(agreed.record.status).toBe('pass');
    expect(agreed.record.checks.map((c) => c.name)).toContain('GPU 0 gpugate\'s vLLM total is CUDA\'s total');
    expect(agreed.stdout).toMatch(/gpugate estimates vLLM's CUDA context at 555\.0 MiB, one bare context measured 655\.0 MiB \(100\.0 MiB more: add this model/);
    expect(failedChecks(judgeFacts(facts({}, cuda), { check: view(97887 * MiB) }).record)).toEqual(['GPU 0 gpugate\'s vLLM total is CUDA\'s total']);
  });

  it('skips when NVML cannot be read directly, and fails a crash of the reader', () => {
    expect(judgeFacts({}, { rc: 3, stderr: 'libnvidia-ml.so.1 not loadable' }).record).toMatchObject({ status: 'skip', summary: 'skipped: NVML could not be read directly: libnvidia-ml.so.1 not loadable' });
    expect(failedChecks(judgeFacts({}, { rc: 1, stderr: 'Traceback' }).record)).toEqual(['driver-facts.py ran']);
  });

  it('reads the simulator with the R525 quirk through ctypes as gpugate does (python3)', async () => {
    const scenario = writeScenario({
      system: { memoryV2UsedIncludesReserved: true },
      devices: [simDevice(0, { name: 'NVIDIA L40S', memory: { totalBytes: 46068 * MiB, reservedBytes: 569 * MiB, usedBytes: 0 } })],
    });
    const python = spawnSync('python3', [join(helpers, 'driver-facts.py'), '0'], {
      encoding: 'utf8', env: { ...process.env, GPUGATE_SIM_SCENARIO: scenario, LD_LIBRARY_PATH: simNvmlDir() },
    });
    expect(python.status, python.stderr).toBe(0);
    const check = await runCli(['check', '--gpus', '0', '--max-used', '100%', '--json'], { env: cliEnv(scenario) });
    const { record } = judgeFacts(JSON.parse(python.stdout) as object, { check: JSON.parse(check.stdout) as object });
    expect(record.status).toBe('pass');
    expect(record.checks.map((c) => c.name)).toContain('GPU 0 gpugate reads the same semantics');
    expect(record.summary).toBe('driver 580.95.05: v2 used-includes-reserved; 1 GPU(s) read');
  });
});
