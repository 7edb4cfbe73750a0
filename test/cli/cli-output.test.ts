/**
 * What the built command reports: the restart race end to end (exit 0 only once the simulated
 * memory is free and stable; 75 with a short timeout), --json against the scenario's numbers,
 * `status` (table, JSON, Prometheus), `holders` with a real orphaned engine worker, and --notify
 * delivering STATUS= to a real unix datagram socket.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cliEnv, parseJsonOutput, runCli } from '../helpers/cli';
import { bundledScenario, simDevice, writeScenario } from '../helpers/sim';

/** Wide enough that no table row is wrapped or folded (off a terminal, tables fit 80 columns). */
const WHOLE_ROWS = { COLUMNS: '400' };

const GiB = 1024 ** 3;
const work = mkdtempSync(join(tmpdir(), 'gpugate-cli-output-'));
const children: ChildProcess[] = [];
const orphans: number[] = [];

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  for (const pid of orphans) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  rmSync(work, { recursive: true, force: true });
});

function readCmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}

interface TimelineEntry { atMs: number; device: number | 'all'; set: { memory?: { usedBytes?: number } } }
interface ScenarioFile { devices: Array<{ uuid: string; pciBusId: string; memory: { totalBytes: number; reservedBytes: number; usedBytes: number } }>; timeline: TimelineEntry[] }

/** The used memory of each device once the whole timeline has played, and when it last changed. */
function finalState(scenario: ScenarioFile): { usedBytes: number[]; lastChangeMs: number } {
  const usedBytes = scenario.devices.map((device) => device.memory.usedBytes);
  let lastChangeMs = 0;
  for (const entry of [...scenario.timeline].sort((a, b) => a.atMs - b.atMs)) {
    const used = entry.set.memory?.usedBytes;
    if (used === undefined) continue;
    lastChangeMs = Math.max(lastChangeMs, entry.atMs);
    for (let i = 0; i < usedBytes.length; i += 1) if (entry.device === 'all' || entry.device === i) usedBytes[i] = used;
  }
  return { usedBytes, lastChangeMs };
}

interface GpuJson { index: number; uuid: string; pciBusId: string; totalBytes: number; usedBytes: number; reservedBytes: number; freeBytes: number; stableForMs: number; settled: boolean; ok: boolean; neededFreeBytes: number }

describe('the restart race, end to end', () => {
  const path = bundledScenario('restart-race');
  const scenario = JSON.parse(readFileSync(path, 'utf8')) as ScenarioFile;
  const final = finalState(scenario);

  it('wait --min-free 0.9 --stable 1s exits 0 only after the memory is free and stable', async () => {
    // The per-reader clock, asked for by name: the timeline starts at gpugate's own NVML init.
    const run = await runCli(['wait', '--min-free', '0.9', '--stable', '1s', '--json'], { env: cliEnv(path, { GPUGATE_SIM_STARTED_AT: 'init' }) });
    expect(run.code).toBe(0);
    const json = parseJsonOutput(run);
    expect(json.result).toBe('ready');
    const gpus = json.gpus as GpuJson[];
    expect(gpus.map((gpu) => gpu.usedBytes)).toEqual(final.usedBytes);
    for (const gpu of gpus) {
      expect(gpu.ok).toBe(true);
      expect(gpu.freeBytes).toBeGreaterThanOrEqual(gpu.neededFreeBytes);
      // Drained to nothing with no holder left: nothing can still be freed, so one quiet poll
      // after the last drain step is enough; the 1 s window is for memory that can come back.
      expect(gpu.settled).toBe(true);
      expect(gpu.stableForMs).toBeGreaterThan(0);
    }
    // The simulator's clock starts at NVML init, after gpugate started: the wait cannot end
    // before the last drain step.
    expect(json.elapsedMs as number).toBeGreaterThanOrEqual(final.lastChangeMs);
    expect(run.stderr).toMatch(/^event=waiting gpu=6 uuid=GPU-\S+ bus=0000:ba:00\.0 used=\S+ used_bytes=\d+ free=\S+ free_bytes=\d+ need_free=86GiB need_free_bytes=\d+ /m);
    expect(run.stderr).toMatch(/^event=ready gpus=0,1,2,3,4,5,6,7 elapsed=\S+ elapsed_ms=\d+ polls=\d+$/m);
  });

  it('the same wait with --timeout 1s exits 75 while the memory is still held', async () => {
    // The shared clock anchored an hour ahead: the host stays at the crash for the whole wait.
    const notBegun = String(Date.now() + 3_600_000);
    const run = await runCli(['wait', '--min-free', '0.9', '--stable', '1s', '--timeout', '1s', '--json'], { env: cliEnv(path, { GPUGATE_SIM_STARTED_AT: notBegun }) });
    expect(run.code).toBe(75);
    const json = parseJsonOutput(run);
    expect(json.result).toBe('timeout');
    const gpus = json.gpus as Array<GpuJson & { reasons: string[]; holders: Array<{ pid: number; class: string }> }>;
    expect(gpus).toHaveLength(8);
    for (const gpu of gpus) {
      expect(gpu.ok).toBe(false);
      expect(gpu.reasons).toContain('memory');
      expect(gpu.usedBytes).toBe(scenario.devices[gpu.index]?.memory.usedBytes);
      // The timeline has not begun: the crashed workers (gone from this machine, exiting at
      // 1.2 s into the timeline) are still listed, as NVML lists them.
      const pid = 48211 + gpu.index;
      // (On a machine where that pid happens to be taken, the class is that process's.)
      expect(gpu.holders).toEqual([expect.objectContaining({ pid, class: existsSync(`/proc/${pid}`) ? expect.any(String) : 'gone' })]);
    }
  });
});

describe('--json', () => {
  it('matches the snapshot: identity and memory numbers of every selected GPU', async () => {
    const devices = [
      simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 512 * 2 ** 20, usedBytes: 3 * GiB } }),
      simDevice(1, { memory: { totalBytes: 80 * GiB, reservedBytes: 256 * 2 ** 20, usedBytes: 0 } }),
      simDevice(2, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 7 * GiB } }),
    ];
    const run = await runCli(['check', '--gpus', '2,0', '--max-used', '4GiB', '--json'], { env: cliEnv(writeScenario({ devices })) });
    expect(run.code).toBe(75);
    const json = parseJsonOutput(run);
    expect(json).toMatchObject({ command: 'check', result: 'busy', exitCode: 75, selection: expect.objectContaining({ source: 'option' }) });
    expect(typeof json.elapsedMs).toBe('number');
    const gpus = json.gpus as GpuJson[];
    expect(gpus.map((gpu) => gpu.index)).toEqual([2, 0]);
    for (const gpu of gpus) {
      const device = devices[gpu.index] as { uuid: string; pciBusId: string; memory: { totalBytes: number; reservedBytes: number; usedBytes: number } };
      expect(gpu).toMatchObject({
        uuid: device.uuid,
        pciBusId: device.pciBusId,
        totalBytes: device.memory.totalBytes,
        usedBytes: device.memory.usedBytes,
        reservedBytes: device.memory.reservedBytes,
        freeBytes: device.memory.totalBytes - device.memory.reservedBytes - device.memory.usedBytes,
        maxUsedBytes: 4 * GiB,
      });
    }
    expect(gpus.map((gpu) => gpu.ok)).toEqual([false, true]);
    // A one-sample check skips the /dev/shm scan unless an action needs it.
    expect(json.stale).toEqual({ holders: [], shm: null });
  });
});

describe('gpugate status', () => {
  const devices = [
    simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 12 * GiB }, persistenceMode: true, computeMode: 'exclusive_process' }),
    simDevice(1),
  ];
  const scenario = writeScenario({ devices, system: { driverVersion: '580.95.05', nvmlVersion: '13.580.95.05', cudaDriverVersion: 13000 } });

  it('shows devices, memory, modes and versions as a table', async () => {
    const run = await runCli(['status'], { env: cliEnv(scenario, WHOLE_ROWS) });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('driver 580.95.05');
    expect(run.stdout).toContain('NVML 13.580.95.05');
    expect(run.stdout).toMatch(/^0 +NVIDIA RTX PRO 6000 Blackwell Server Edition +0000:10:00\.0 +12GiB +84GiB .*exclusive_process/m);
    expect(run.stdout).toContain('GPU-7e570000-0000-4000-8000-000000000001');
  });

  it('lists MIG instances under their GPU in the table: slot, UUID, instance ids, memory and processes', async () => {
    const mig = bundledScenario('mig');
    const run = await runCli(['status'], { env: cliEnv(mig, WHOLE_ROWS) });
    expect(run.code).toBe(0);
    const scenarioMig = (JSON.parse(readFileSync(mig, 'utf8')) as { devices: Array<{ migDevices?: Array<{ slot: number; uuid: string; gpuInstanceId: number; processes?: Array<{ pid: number }> }> }> }).devices[0]?.migDevices ?? [];
    expect(scenarioMig.length).toBeGreaterThan(1);
    for (const instance of scenarioMig) {
      expect(run.stdout).toMatch(new RegExp(`^ {4}MIG ${instance.slot} ${instance.uuid} gi ${instance.gpuInstanceId} ci 0 used \\S+ free \\S+ of \\S+$`, 'm'));
      for (const process of instance.processes ?? []) expect(run.stdout).toMatch(new RegExp(`^ {6}pid ${process.pid} `, 'm'));
    }
  });

  it('prints the snapshot as JSON', async () => {
    const run = await runCli(['status', '--json'], { env: cliEnv(scenario) });
    expect(run.code).toBe(0);
    const json = parseJsonOutput(run);
    expect(json.library).toMatchObject({ driverVersion: '580.95.05', cudaDriverVersion: '13.0' });
    const reported = json.devices as Array<{ uuid: string; memory: { usedBytes: number }; computeMode: string }>;
    expect(reported.map((device) => device.uuid)).toEqual(devices.map((device) => device.uuid));
    expect(reported[0]).toMatchObject({ memory: { usedBytes: 12 * GiB }, computeMode: 'exclusive_process' });
  });

  it('writes the node_exporter textfile format', async () => {
    const run = await runCli(['status', '--format', 'prometheus'], { env: cliEnv(scenario) });
    expect(run.code).toBe(0);
    const lines = run.stdout.trim().split('\n');
    // OpenMetrics' end marker closes the file (a comment to the Prometheus text parser).
    expect(lines.pop()).toBe('# EOF');
    for (const line of lines) expect(line).toMatch(/^(# (HELP|TYPE) gpugate_\w+ .+|gpugate_\w+(\{[^}]*\})? [-+0-9.eE]+|gpugate_\w+(\{[^}]*\})? (NaN|[+-]Inf))$/);
    expect(lines).toContain(`gpugate_gpu_memory_used_bytes{gpu="0",uuid="${String(devices[0]?.uuid)}"} ${12 * GiB}`);
    expect(lines).toContain('# TYPE gpugate_gpu_memory_free_bytes gauge');
    expect(lines.filter((line) => line.startsWith('# TYPE gpugate_gpu_memory_used_bytes'))).toHaveLength(1);
  });

  it('rejects --json together with --format prometheus (exit 64)', async () => {
    const run = await runCli(['status', '--json', '--format', 'prometheus'], { env: cliEnv(scenario) });
    expect(run.code).toBe(64);
  });
});

describe('gpugate holders', () => {
  it('classifies a real reparented engine worker as an orphan, in the table, JSON and Prometheus', async () => {
    const started = spawnSync('bash', ['-c', 'exec -a VLLM::Worker_TP3 sleep 60 </dev/null >/dev/null 2>&1 & echo $!'], { encoding: 'utf8' });
    const pid = Number(started.stdout.trim());
    orphans.push(pid);
    // The background subshell may not have exec'd yet: wait until the title is in place.
    for (let i = 0; i < 200 && !readCmdline(pid).startsWith('VLLM::Worker_TP3\0'); i += 1) await new Promise((resolve) => setTimeout(resolve, 25));
    const scenario = writeScenario({
      devices: [simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 60 * GiB }, processes: [{ pid, usedBytes: 50 * GiB, kinds: ['compute'] }] })],
    });
    const table = await runCli(['holders'], { env: cliEnv(scenario) });
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(new RegExp(`^0 +${pid} +orphan +50GiB .*VLLM::Worker_TP3`, 'm'));
    expect(table.stdout).toMatch(/^0 +- +unattributed +10GiB/m);
    expect(table.stderr).toMatch(new RegExp(`^event=stale gpu=0 pid=${pid} class=orphan`, 'm'));

    const json = parseJsonOutput(await runCli(['holders', '--json'], { env: cliEnv(scenario) }));
    const gpu = (json.gpus as Array<{ holders: Array<{ pid: number; class: string; name: string }>; unattributedBytes: number }>)[0];
    expect(gpu?.holders).toEqual([expect.objectContaining({ pid, class: 'orphan', name: 'VLLM::Worker_TP3' })]);
    expect(gpu?.unattributedBytes).toBe(10 * GiB);

    const prom = await runCli(['holders', '--format', 'prometheus'], { env: cliEnv(scenario) });
    // Labelled by the unit it lives in (wherever this test runs).
    expect(prom.stdout).toMatch(/^gpugate_gpu_holders\{gpu="0",uuid="GPU-7e570000-0000-4000-8000-000000000000",class="orphan",unit="[^"]*"\} 1$/m);
    expect(prom.stdout).toContain(`gpugate_gpu_unattributed_bytes{gpu="0",uuid="GPU-7e570000-0000-4000-8000-000000000000"} ${10 * GiB}`);
  });
});

describe('a holder on several GPUs', () => {
  it('is shown under each GPU with what it holds there, not its total (holders table and JSON, check JSON)', async () => {
    const child = spawn('sleep', ['60'], { stdio: 'ignore' });
    children.push(child);
    const pid = child.pid as number;
    // One real process: 10 GiB on GPU 0, 30 GiB on GPU 1 (40 GiB in all).
    const scenario = writeScenario({
      devices: [
        simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 10 * GiB }, processes: [{ pid, usedBytes: 10 * GiB, kinds: ['compute'] }] }),
        simDevice(1, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 30 * GiB }, processes: [{ pid, usedBytes: 30 * GiB, kinds: ['compute'] }] }),
      ],
    });
    const table = await runCli(['holders'], { env: cliEnv(scenario) });
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(new RegExp(`^0 +${pid} +\\S+ +10GiB `, 'm'));
    expect(table.stdout).toMatch(new RegExp(`^1 +${pid} +\\S+ +30GiB `, 'm'));
    expect(table.stdout).not.toContain('40GiB');

    type HolderJson = { pid: number; usedBytes: number | null; gpus: number[] };
    const holders = parseJsonOutput(await runCli(['holders', '--json'], { env: cliEnv(scenario) }));
    const listed = (holders.gpus as Array<{ index: number; holders: HolderJson[] }>).map((gpu) => [gpu.index, gpu.holders.map((h) => [h.pid, h.usedBytes, h.gpus])]);
    expect(listed).toEqual([[0, [[pid, 10 * GiB, [0, 1]]]], [1, [[pid, 30 * GiB, [0, 1]]]]]);

    const check = parseJsonOutput(await runCli(['check', '--max-used', '1GiB', '--json'], { env: cliEnv(scenario) }));
    const judged = (check.gpus as Array<{ index: number; holders: HolderJson[] }>).map((gpu) => [gpu.index, gpu.holders.map((h) => [h.pid, h.usedBytes])]);
    expect(judged).toEqual([[0, [[pid, 10 * GiB]]], [1, [[pid, 30 * GiB]]]]);
  });
});

describe('--notify', () => {
  /** A real unix datagram socket (Python: Node has none) printing each datagram it receives. */
  function receiver(address: string): { child: ChildProcess; ready: Promise<void>; received: () => string } {
    const code = [
      'import socket, sys',
      'address = sys.argv[1]',
      "bind_to = '\\0' + address[1:] if address.startswith('@') else address",
      's = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)',
      's.bind(bind_to)',
      "print('READY', flush=True)",
      'while True:',
      '    data = s.recv(65536)',
      "    print(repr(data.decode()), flush=True)",
    ].join('\n');
    const child = spawn('python3', ['-c', code, address], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    let out = '';
    const ready = new Promise<void>((resolve) => {
      child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
        out += chunk;
        if (out.includes('READY')) resolve();
      });
    });
    return { child, ready, received: () => out };
  }

  it.each([
    ['a socket path', () => join(work, 'notify.sock')],
    ['the abstract namespace (@)', () => `@gpugate-test-${process.pid}`],
  ])('delivers STATUS= lines to %s', async (_what, address) => {
    const socket = address();
    const listener = receiver(socket);
    await listener.ready;
    const scenario = writeScenario({
      devices: [simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 30 * GiB } })],
      // Deterministic: memory frees after the 6th memory query, whatever the machine's speed.
      timeline: [{ atCall: 6, function: 'nvmlDeviceGetMemoryInfo_v2', device: 0, set: { memory: { usedBytes: 0 } } }],
    });
    const run = await runCli(['wait', '--notify', '--stable', '300ms', '--interval', '100ms'], { env: cliEnv(scenario, { NOTIFY_SOCKET: socket }) });
    expect(run.code).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 200));
    listener.child.kill('SIGKILL');
    const received = listener.received();
    expect(received).toMatch(/'STATUS=waiting: GPU 0 memory\+unstable 30GiB used/);
    // Success clears the status, so it does not stay on the running service.
    expect(received).toMatch(/'STATUS='\s*$/);
    expect(received).not.toMatch(/starting'/);
    expect(received).not.toContain('READY=1');
  });

  it('is a no-op without NOTIFY_SOCKET', async () => {
    const run = await runCli(['wait', '--notify', '--stable', '0s'], { env: cliEnv(writeScenario({ devices: [simDevice(0)] })) });
    expect(run.code).toBe(0);
  });
});
