/**
 * The NVML simulator library (sim/) seen from outside: an independent C client (test/c/
 * nvml_client.c), compiled here with `cc`, loads the real built library by path and as
 * libnvidia-ml.so.1 through LD_LIBRARY_PATH, and must read exactly what the scenario says and
 * get the real library's answers to misuse (UNINITIALIZED, INVALID_ARGUMENT, INSUFFICIENT_SIZE...).
 */
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeTestTempDir } from '../helpers/temp-root';
import {
  bundledScenario,
  freshBundledScenario,
  replaceScenario,
  repoRoot,
  SIM_RELOAD_SETTLE_MS,
  simDevice,
  simEnv,
  simLegacyLibraryPath,
  simLibraryFor,
  simLibraryPath,
  simNvmlDir,
  simProfileLibraryPath,
  writeScenario,
  type SimScenario,
} from '../helpers/sim';

const MiB = 2 ** 20;
const GiB = 2 ** 30;

let dir = '';
let client = '';

interface ClientResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runClient(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 20_000): Promise<ClientResult> {
  return new Promise((resolve) => {
    execFile(client, args, { env, timeout: timeoutMs }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
      resolve({ code, stdout, stderr });
    });
  });
}

interface DumpDevice {
  index: number;
  handleRc: number;
  name?: string;
  uuid?: string;
  pciBusId?: string;
  minorNumber?: number;
  computeCapability?: string;
  memoryRc?: number;
  memory?: { totalBytes: number; reservedBytes?: number; freeBytes: number; usedBytes: number };
  processesRc?: number;
  processes?: Array<{ pid: number; usedBytes: number | null; gpuInstanceId?: number; computeInstanceId?: number }>;
}
interface Dump {
  countRc: number;
  count: number;
  driverVersion?: string;
  devices: DumpDevice[];
}

async function dump(scenario: string, extraArgs: string[] = [], lib: string | null = simLibraryPath()): Promise<Dump[]> {
  const args = lib === null ? [...extraArgs, 'dump'] : ['--lib', lib, ...extraArgs, 'dump'];
  const env = lib === null ? simEnv(scenario, { LD_LIBRARY_PATH: simNvmlDir() }) : simEnv(scenario);
  const result = await runClient(args, env);
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return result.stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Dump);
}

/** Parses `probe` output into name -> the fields after it. */
async function probe(scenario: string, lib = simLibraryPath()): Promise<Map<string, string[]>> {
  const result = await runClient(['--lib', lib, 'probe'], simEnv(scenario));
  expect(result.code).toBe(0);
  const out = new Map<string, string[]>();
  for (const line of result.stdout.trim().split('\n')) {
    const [name, ...rest] = line.split(' ');
    if (name === 'mig_slot') out.set(`mig_slot_${rest[0] ?? ''}`, rest.slice(1));
    else if (name !== undefined) out.set(name, rest);
  }
  return out;
}

function readJson(file: string): SimScenario {
  return JSON.parse(fs.readFileSync(file, 'utf8')) as SimScenario;
}

interface ScenarioDevice {
  name: string;
  uuid: string;
  pciBusId: string;
  minorNumber: number;
  memory: { totalBytes: number; reservedBytes: number; usedBytes: number };
  processes: Array<{ pid: number; usedBytes: number; name: string }>;
}

beforeAll(async () => {
  for (const lib of [simLibraryPath(), simLegacyLibraryPath(), path.join(simNvmlDir(), 'libnvidia-ml.so.1')]) {
    if (!fs.existsSync(lib)) throw new Error(`${lib} is missing: build the native targets first (npx node-gyp rebuild)`);
  }
  dir = makeTestTempDir('gpugate-sim-test-');
  client = path.join(dir, 'nvml_client');
  await new Promise<void>((resolve, reject) => {
    execFile('cc', ['-O2', '-Wall', '-o', client, path.join(repoRoot(), 'test', 'c', 'nvml_client.c'), '-ldl', '-lpthread'], (error, _out, stderr) => {
      if (error) reject(new Error(`cc failed: ${stderr}`));
      else resolve();
    });
  });
});

afterAll(() => {
  if (dir !== '') fs.rmSync(dir, { recursive: true, force: true });
});

describe('reading the bundled 8-GPU scenarios', () => {
  it('reads every field of the idle 8x RTX PRO 6000 host exactly as the scenario file states (path dlopen)', async () => {
    const file = bundledScenario('idle-8x-rtx-pro-6000');
    const expected = (readJson(file)['devices'] as ScenarioDevice[]);
    const [snap] = await dump(file);
    expect(snap?.countRc).toBe(0);
    expect(snap?.count).toBe(8);
    expect(snap?.driverVersion).toBe('580.95.05');
    expect(snap?.devices).toHaveLength(8);
    snap?.devices.forEach((d, i) => {
      const e = expected[i]!;
      expect(d.handleRc).toBe(0);
      expect(d.name).toBe('NVIDIA RTX PRO 6000 Blackwell Server Edition');
      expect(d.uuid).toBe(e.uuid);
      expect(d.pciBusId).toBe(e.pciBusId);
      expect(d.minorNumber).toBe(i);
      expect(d.computeCapability).toBe('12.0');
      expect(d.memory).toEqual({
        totalBytes: 97887 * MiB,
        reservedBytes: e.memory.reservedBytes,
        freeBytes: 97887 * MiB - e.memory.reservedBytes,
        usedBytes: 0,
      });
      expect(e.memory.reservedBytes).toBeGreaterThan(0);
      expect(e.memory.reservedBytes).toBeLessThan(1 * GiB);
      expect(d.processes).toEqual([]);
    });
    expect(new Set(snap?.devices.map((d) => d.uuid)).size).toBe(8);
    expect(new Set(snap?.devices.map((d) => d.pciBusId)).size).toBe(8);
  });

  it('answers identically when loaded as libnvidia-ml.so.1 through LD_LIBRARY_PATH', async () => {
    for (const name of ['idle-8x-rtx-pro-6000', 'restart-race']) {
      const file = bundledScenario(name);
      const byPath = await dump(file);
      const byName = await dump(file, [], null);
      expect(byName).toEqual(byPath);
    }
  });

  it('shows the restart race at its start: one VLLM worker per GPU holding about 92 GiB', async () => {
    const file = freshBundledScenario('restart-race');
    const expected = readJson(file)['devices'] as ScenarioDevice[];
    const [snap] = await dump(file);
    expect(snap?.count).toBe(8);
    snap?.devices.forEach((d, i) => {
      const e = expected[i]!;
      expect(e.processes[0]?.name).toBe(`VLLM::Worker_TP${i}`);
      expect(d.memory?.usedBytes).toBe(e.memory.usedBytes);
      expect(d.memory?.usedBytes).toBeGreaterThan(90 * GiB);
      expect(d.memory?.freeBytes).toBe(e.memory.totalBytes - e.memory.reservedBytes - e.memory.usedBytes);
      expect(d.processes).toEqual([
        { pid: e.processes[0]!.pid, usedBytes: e.processes[0]!.usedBytes, gpuInstanceId: 0xffffffff, computeInstanceId: 0xffffffff },
      ]);
    });
  });

  it('every scenario shipped in scenarios/ loads without error', async () => {
    const files = fs.readdirSync(path.join(repoRoot(), 'scenarios')).filter((f) => f.endsWith('.json'));
    expect(files.length).toBeGreaterThanOrEqual(4);
    for (const f of files) {
      const file = path.join(repoRoot(), 'scenarios', f);
      const [snap] = await dump(file, [], simLibraryFor(file));
      expect(snap?.countRc, f).toBe(0);
      expect(snap?.count, f).toBeGreaterThan(0);
    }
  });

  it('reports GPU_IS_LOST (15) for GPU 5 only in lost-gpu.json', async () => {
    const [snap] = await dump(bundledScenario('lost-gpu'));
    expect(snap?.devices.map((d) => d.handleRc)).toEqual([0, 0, 0, 0, 0, 15, 0, 0]);
  });
});

describe('the restart race drains over time', () => {
  it('processes vanish first, then memory falls in steps to zero and stays there', async () => {
    const child = spawn(client, ['--lib', simLibraryPath(), 'interactive'], { env: simEnv(freshBundledScenario('restart-race')) });
    const lines = readline.createInterface({ input: child.stdout });
    const iterator = lines[Symbol.asyncIterator]();
    const next = async (): Promise<string> => (await iterator.next()).value as string;
    try {
      expect(await next()).toBe('ready');
      const samples: Array<{ used: number; procs: number }> = [];
      const started = Date.now();
      while (Date.now() - started < 15_000) {
        child.stdin.write('mem 0\nprocs 0\n');
        const mem = /used=(\d+)/.exec(await next());
        const procs = /count=(\d+)/.exec(await next());
        samples.push({ used: Number(mem?.[1]), procs: Number(procs?.[1]) });
        const last = samples.at(-1)!;
        if (last.used === 0 && samples.filter((s) => s.used === 0).length >= 5) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      child.stdin.write('quit\n');
      const used = samples.map((s) => s.used);
      expect(used[0]).toBeGreaterThan(90 * GiB);
      expect(used.at(-1)).toBe(0);
      for (let i = 1; i < used.length; i++) expect(used[i]!).toBeLessThanOrEqual(used[i - 1]!);
      // Several distinct steps between "held" and "free".
      expect(new Set(used).size).toBeGreaterThanOrEqual(4);
      // The worker process is gone before the memory is.
      const firstNoProc = samples.findIndex((s) => s.procs === 0);
      const firstZero = samples.findIndex((s) => s.used === 0);
      expect(samples[0]!.procs).toBe(1);
      expect(firstNoProc).toBeGreaterThan(0);
      expect(firstNoProc).toBeLessThan(firstZero);
    } finally {
      child.kill();
    }
  }, 30_000);
});

describe('real-library behaviour', () => {
  const LEGACY_DRIVER = { driverVersion: '410.129', nvmlVersion: '10.410.129', cudaDriverVersion: 10000 };
  const threeProcesses = (system?: object): string =>
    writeScenario({
      ...(system === undefined ? {} : { system }),
      devices: [
        simDevice(0, {
          processes: [
            { pid: 101, usedBytes: 1 * GiB },
            { pid: 102, usedBytes: 2 * GiB, kinds: ['compute', 'graphics'] },
            { pid: 103, usedBytes: 3 * GiB },
          ],
          memory: { totalBytes: 80 * GiB, reservedBytes: 512 * MiB, usedBytes: 6 * GiB },
        }),
        simDevice(1),
      ],
    });

  it('is UNINITIALIZED before init and after the last shutdown; init is reference counted', async () => {
    const p = await probe(threeProcesses());
    expect(p.get('count_before_init')).toEqual(['1']);
    expect(p.get('shutdown_before_init')).toEqual(['1']);
    expect(p.get('init_first')).toEqual(['0']);
    expect(p.get('init_second')).toEqual(['0']);
    expect(p.get('shutdown_first')).toEqual(['0']);
    expect(p.get('count_after_one_shutdown')).toEqual(['0', '2']);
    expect(p.get('shutdown_last')).toEqual(['0']);
    expect(p.get('count_after_last_shutdown')).toEqual(['1']);
    expect(p.get('memory_after_last_shutdown')).toEqual(['1']);
    expect(p.get('shutdown_extra')).toEqual(['1']);
  });

  it('answers INVALID_ARGUMENT for NULL pointers, foreign handles and bad indices', async () => {
    const p = await probe(threeProcesses());
    for (const key of ['handle_bad_index', 'handle_null_out', 'count_null', 'name_null', 'memory_bad_handle', 'memory_null_handle',
      'memory_null_out', 'procs_null_count', 'procs_bad_handle', 'temperature_bad_sensor']) {
      expect(p.get(key), key).toEqual(['2']);
    }
  });

  it('answers INSUFFICIENT_SIZE for short string buffers and ARGUMENT_VERSION_MISMATCH for a wrong memory struct version', async () => {
    const p = await probe(threeProcesses());
    expect(p.get('name_short')).toEqual(['7']);
    expect(p.get('uuid_short')).toEqual(['7']);
    expect(p.get('name_full')?.join(' ')).toBe('0 NVIDIA RTX PRO 6000 Blackwell Server Edition');
    expect(p.get('memory_wrong_version')).toEqual(['25']);
  });

  it('reports v2 memory without reserved and v1 memory with reserved counted as used', async () => {
    const p = await probe(threeProcesses());
    const total = 80 * GiB;
    const reserved = 512 * MiB;
    const used = 6 * GiB;
    expect(p.get('memory_v2')).toEqual(['0', String(total), String(reserved), String(total - reserved - used), String(used)]);
    expect(p.get('memory_v1')).toEqual(['0', String(total), String(total - reserved - used), String(used + reserved)]);
  });

  it('follows the count-then-fill protocol for process lists, returning the needed count', async () => {
    const p = await probe(threeProcesses());
    expect(p.get('procs_query')).toEqual(['7', '3']);
    expect(p.get('procs_too_small')).toEqual(['7', '3']);
    expect(p.get('procs_fill')).toEqual(['0', '3', `101:${GiB}`, `102:${2 * GiB}`, `103:${3 * GiB}`]);
    const none = await probe(writeScenario({ devices: [simDevice(0)] }));
    expect(none.get('procs_query')).toEqual(['0', '0']);
  });

  it('has an error string for every code, and "Unknown Error" for unlisted ones', async () => {
    const p = await probe(threeProcesses());
    expect(p.get('error_string_0')?.join(' ')).toBe('Success');
    expect(p.get('error_string_15')?.join(' ')).toBe('GPU is lost');
    expect(p.get('error_string_999')?.join(' ')).toBe('Unknown Error');
    expect(p.get('error_string_12345')?.join(' ')).toBe('Unknown Error');
    expect(p.get('error_string_all_codes')).toEqual(['1']);
  });

  it('writes 24-byte entries from _v2 and _v3 on a current driver; a 535.54 driver writes 32 from _v3 and 24 from _v2', async () => {
    const procs = [{ pid: 7001, usedBytes: GiB }, { pid: 7002, usedBytes: GiB }, { pid: 7003, usedBytes: null }];
    const current = writeScenario({ devices: [simDevice(0, { processes: procs })] });
    const r535 = writeScenario({ system: { driverVersion: '535.54.03' }, devices: [simDevice(0, { processes: procs })] });
    const raw = async (file: string, symbol: string): Promise<string> =>
      (await runClient(['--lib', simLibraryFor(file), 'rawprocs', '0', symbol], simEnv(file))).stdout.trim();
    expect(await raw(current, 'nvmlDeviceGetComputeRunningProcesses_v3')).toBe('rc=0 count=3 bytesWritten=72 pids=7001,7002,7003');
    expect(await raw(current, 'nvmlDeviceGetComputeRunningProcesses_v2')).toBe('rc=0 count=3 bytesWritten=72 pids=7001,7002,7003');
    expect(await raw(r535, 'nvmlDeviceGetComputeRunningProcesses_v3')).toBe('rc=0 count=3 bytesWritten=96 pids=7001,7002,7003');
    expect(await raw(r535, 'nvmlDeviceGetComputeRunningProcesses_v2')).toBe('rc=0 count=3 bytesWritten=72 pids=7001,7002,7003');
    expect(await raw(r535, 'nvmlDeviceGetComputeRunningProcesses')).toBe('rc=0 count=3 bytesWritten=48 pids=7001,7002,7003');
    const bundled = bundledScenario('r535-stride');
    const shipped = await runClient(['--lib', simLibraryFor(bundled), 'rawprocs', '1'], simEnv(bundled));
    expect(shipped.stdout.trim()).toBe('rc=0 count=3 bytesWritten=96 pids=30111,30112,30113');
    const [snap] = await dump(current);
    expect(snap?.devices[0]?.processes?.map((p) => p.usedBytes)).toEqual([GiB, GiB, null]);
  });

  it('the legacy variant exports the plain symbols and NVML 5.319\'s _v2 entry points but no later _v2/_v3 ones, and serves 16-byte process entries', async () => {
    // Drivers 319-469 export these (NVML 5.319 added them); nvidia-ml-py, nvitop and go-nvml call them.
    const since319 = ['nvmlInit_v2', 'nvmlDeviceGetCount_v2', 'nvmlDeviceGetHandleByIndex_v2', 'nvmlDeviceGetPciInfo_v2', 'nvmlDeviceGetHandleByPciBusId_v2'];
    const later = ['nvmlDeviceGetPciInfo_v3', 'nvmlDeviceGetMemoryInfo_v2', 'nvmlDeviceGetComputeRunningProcesses_v3',
      'nvmlDeviceGetComputeRunningProcesses_v2', 'nvmlDeviceGetGraphicsRunningProcesses_v3', 'nvmlDeviceGetMPSComputeRunningProcesses_v3',
      'nvmlSystemGetCudaDriverVersion_v2'];
    const versioned = [...since319, ...later];
    const plain = ['nvmlInit', 'nvmlDeviceGetCount', 'nvmlDeviceGetHandleByIndex', 'nvmlDeviceGetPciInfo', 'nvmlDeviceGetMemoryInfo',
      'nvmlDeviceGetComputeRunningProcesses', 'nvmlShutdown', 'nvmlErrorString', 'gpugateSimLastError', 'gpugateSimCallCount'];
    const legacy = await runClient(['--lib', simLegacyLibraryPath(), 'symbols', ...versioned, ...plain], process.env);
    expect(legacy.stdout.trim().split('\n')).toEqual([...since319.map((s) => `${s} present`), ...later.map((s) => `${s} absent`), ...plain.map((s) => `${s} present`)]);
    const full = await runClient(['--lib', simLibraryPath(), 'symbols', ...versioned], process.env);
    expect(full.stdout.trim().split('\n')).toEqual(versioned.map((s) => `${s} present`));

    const file = threeProcesses(LEGACY_DRIVER);
    const [snap] = await dump(file, ['--v1'], simLegacyLibraryPath());
    expect(snap?.devices[0]?.processes).toEqual([
      { pid: 101, usedBytes: GiB },
      { pid: 102, usedBytes: 2 * GiB },
      { pid: 103, usedBytes: 3 * GiB },
    ]);
    expect(snap?.devices[0]?.memory).toEqual({ totalBytes: 80 * GiB, freeBytes: 80 * GiB - 512 * MiB - 6 * GiB, usedBytes: 6 * GiB + 512 * MiB });
    expect(snap?.devices[0]?.pciBusId).toBe('0000:10:00.0');
  });

  it('finds handles by UUID and by PCI bus id (long and legacy forms), and reads names, modes, power and versions', async () => {
    const p = await probe(freshBundledScenario('restart-race'));
    expect(p.get('handle_by_uuid')).toEqual(['0', 'same']);
    expect(p.get('handle_by_uuid_unknown')).toEqual(['6']);
    expect(p.get('handle_by_pci')).toEqual(['0', 'same']);
    expect(p.get('handle_by_pci_legacy')).toEqual(['0', 'same', '0000:18:00.0']);
    expect(p.get('handle_by_pci_garbage')).toEqual(['2']);
    expect(p.get('pci_info')).toEqual(['00000000:18:00.0', '0', '24', '0', '0x2BB510DE']);
    expect(p.get('process_name')?.join(' ')).toBe('0 VLLM::Worker_TP0');
    expect(p.get('process_name_unknown')).toEqual(['6']);
    expect(p.get('modes')).toEqual(['index=0', 'persistence=0:1', 'computeMode=0:0', 'utilization=0:0/0', 'powerMw=0:62500', 'cuda=0:13000']);
    expect(p.get('version_short')).toEqual(['7']);
    expect(p.get('temperature')).toEqual(['0', '31']);
    expect(p.get('mig_mode')).toEqual(['0', '0', '0']);
  });

  it('answers NOT_SUPPORTED for fields the scenario sets to null', async () => {
    const file = writeScenario({
      devices: [simDevice(0, { persistenceMode: null, computeMode: null, utilization: null, powerWatts: null, temperatureC: null, migMode: null })],
    });
    const p = await probe(file);
    expect(p.get('modes')).toEqual(['index=0', 'persistence=3:9', 'computeMode=3:9', 'utilization=3:0/0', 'powerMw=3:0', 'cuda=0:13000']);
    expect(p.get('temperature')?.[0]).toBe('3');
    expect(p.get('mig_mode')).toEqual(['3', '9', '9']);
    expect(p.get('mig_max')).toEqual(['3', '0']);
  });

  it('serves MIG devices by slot, with NOT_FOUND for holes, their own uuid, ids, memory and processes', async () => {
    const p = await probe(bundledScenario('mig'));
    expect(p.get('mig_mode')).toEqual(['0', '1', '1']);
    expect(p.get('mig_max')).toEqual(['0', '4']);
    expect(p.get('mig_slot_0')).toEqual(['0', 'MIG-4a1c7e92-3b5d-5f08-9c2e-6d1a8b4f7e30', 'gi=3', 'ci=0', 'parent=same', `mem=0:${20 * GiB + 512 * MiB}`, 'procs=7:1']);
    expect(p.get('mig_slot_1')?.slice(0, 5)).toEqual(['0', 'MIG-b83e05d1-7c4a-5e19-a2f6-0e9d3c7b5a41', 'gi=4', 'ci=0', 'parent=same']);
    expect(p.get('mig_slot_2')).toEqual(['6']);
    expect(p.get('mig_slot_3')?.slice(0, 3)).toEqual(['0', 'MIG-e29f6a3c-0d8b-5c71-b5e4-3f2a7d9c1b06', 'gi=6']);
  });
});

describe('malformed scenarios', () => {
  async function initError(file: string | null): Promise<{ line: string; stderr: string }> {
    const env = simEnv(file ?? '');
    if (file === null) delete env['GPUGATE_SIM_SCENARIO'];
    const result = await runClient(['--lib', simLibraryPath(), 'dump'], env);
    expect(result.code).toBe(3);
    return { line: result.stdout.trim(), stderr: result.stderr };
  }

  it('bad JSON: init returns UNKNOWN (999) and the same one line names FILE:LINE:COL on stderr and from gpugateSimLastError', async () => {
    const file = writeScenario('{\n  "devices": [\n    { "memory": { "totalBytes": 1 } }\n    { "memory": {} }\n  ]\n}\n');
    const { line, stderr } = await initError(file);
    const message = `${file}:4:5: expected ',' or ']' after an array element`;
    expect(line).toBe(`init-failed rc=999 lastError=${message}`);
    expect(stderr).toBe(`gpugate-sim: ${message}\n`);
  });

  it('a wrong type names the key and the position of the value', async () => {
    const file = writeScenario({ devices: [simDevice(0, { memory: { totalBytes: '80G' } })] });
    const { line } = await initError(file);
    expect(line).toMatch(new RegExp(`lastError=${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:\\d+:\\d+: expected a non-negative integer number of bytes for "totalBytes"$`));
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    const [, row, col] = /:(\d+):(\d+): /.exec(line) ?? [];
    expect(lines[Number(row) - 1]?.slice(Number(col) - 1)).toMatch(/^"80G"/);
  });

  it('an unknown key at device level is an error that lists the known keys', async () => {
    const file = writeScenario({ devices: [simDevice(0, { memroy: {} })] });
    const { line } = await initError(file);
    expect(line).toContain('found unknown key "memroy"');
    expect(line).toContain('expected one of name, uuid, pciBusId');
  });

  it('an unknown key holding control characters or quotes is named escaped, on one line', async () => {
    // "\name" in the file is a newline and "ame" once unescaped (the fuzz property found it).
    const file = writeScenario({ devices: [simDevice(0, { '\name': {}, 'q"\\\u0007': 1 })] });
    const { line, stderr } = await initError(file);
    expect(line).toContain('found unknown key "\\name"');
    expect(stderr.trimEnd().split('\n')).toHaveLength(1);
    const second = writeScenario({ devices: [simDevice(0, { 'q"\\\u0007': 1 })] });
    expect((await initError(second)).line).toContain('found unknown key "q\\"\\\\\\u0007"');
  });

  it('missing file and unset GPUGATE_SIM_SCENARIO are clear errors, not crashes', async () => {
    const missing = path.join(dir, 'does-not-exist.json');
    const a = await initError(missing);
    expect(a.line).toBe(`init-failed rc=999 lastError=${missing}: cannot open the scenario file (No such file or directory); expected a readable JSON file`);
    const b = await initError(null);
    expect(b.line).toBe('init-failed rc=999 lastError=GPUGATE_SIM_SCENARIO is not set; expected the path of a JSON scenario file');
    const c = await initError(writeScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlNoSuchThing', return: 3 }] }));
    expect(c.line).toContain('expected an NVML symbol the simulator exports');
  });

  it('a kernelBlock that is not an absolute file path is a one-line error at its value', async () => {
    for (const bad of ['relative/block', '', 'nul\u0000/x']) {
      const file = writeScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', kernelBlock: bad }] });
      const { line, stderr } = await initError(file);
      expect(line).toMatch(/:\d+:\d+: expected an absolute file path for "kernelBlock", found "/);
      expect(stderr.trimEnd().split('\n')).toHaveLength(1);
    }
    const notString = writeScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', kernelBlock: true }] });
    expect((await initError(notString)).line).toContain('expected a string for "kernelBlock", found');
  });

  it('a crash that names no signal of its table is an error listing the names it takes', async () => {
    for (const bad of ['SIGFOO', 'segv', '11', '']) {
      const file = writeScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', crash: bad }] });
      const { line } = await initError(file);
      expect(line).toContain(`expected one of SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE, SIGTRAP, SIGKILL for "crash", found ${JSON.stringify(bad)}`);
    }
  });

  it('a fault with the new keys still rejects an unknown key, and one with no action at all is an error naming all five', async () => {
    const misspelt = writeScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', kernelBlock: '/tmp/x', crsah: 'SIGSEGV' }] });
    const a = await initError(misspelt);
    expect(a.line).toContain('found unknown key "crsah"');
    expect(a.line).toMatch(/expected one of .*kernelBlock, crash.* in a fault/);
    const empty = writeScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', fromCall: 1 }] });
    expect((await initError(empty)).line).toContain('expected "return", "delayMs", "hang": true, "kernelBlock" or "crash" in a fault');
  });
});

describe('timeline, faults, reload and statistics', () => {
  it('atCall changes apply before call number atCall+1 of that function, the same way on every run', async () => {
    const file = writeScenario({
      devices: [simDevice(0)],
      timeline: [{ atCall: 2, function: 'nvmlDeviceGetMemoryInfo_v2', device: 0, set: { memory: { usedBytes: 5 * GiB } } }],
    });
    const runs = [await dump(file, ['--repeat', '4']), await dump(file, ['--repeat', '4'])];
    for (const snaps of runs) expect(snaps.map((s) => s.devices[0]?.memory?.usedBytes)).toEqual([0, 0, 5 * GiB, 5 * GiB]);
    expect(runs[1]).toEqual(runs[0]);
  });

  it('a scenario read by a later nvmlInit in the same process starts its own call counts', async () => {
    const scenario = {
      devices: [simDevice(0)],
      timeline: [{ atCall: 1, function: 'nvmlDeviceGetMemoryInfo_v2', device: 0, set: { memory: { usedBytes: 3 * GiB } } }],
    };
    const first = writeScenario(scenario);
    const second = writeScenario(scenario);
    const snaps = await dump(first, ['--repeat', '2', '--then', second]);
    expect(snaps.map((s) => s.devices[0]?.memory?.usedBytes)).toEqual([0, 3 * GiB, 0, 3 * GiB]);
  });

  it('faults are bounded in time by atMs/untilMs (measured from the timeline anchor, here the file write time)', async () => {
    const file = writeScenario({
      devices: [simDevice(0), simDevice(1)],
      faults: [
        { function: 'nvmlDeviceGetMemoryInfo_v2', device: 0, return: 3, untilMs: 60_000 },
        { function: 'nvmlDeviceGetMemoryInfo_v2', device: 1, return: 3, atMs: 60_000 },
      ],
    });
    const [snap] = await dump(file);
    expect(snap?.devices.map((d) => d.memoryRc)).toEqual([3, 0]);
  });

  it('faults return a code only within fromCall/untilCall, and per device', async () => {
    const file = writeScenario({
      devices: [simDevice(0), simDevice(1)],
      faults: [{ function: 'nvmlDeviceGetMemoryInfo*', device: 1, return: 10, fromCall: 2, untilCall: 4 }],
    });
    const snaps = await dump(file, ['--repeat', '3']);
    // Calls of nvmlDeviceGetMemoryInfo_v2 alternate device 0, 1: indices 0..5; 2 and 3 fail only on device 1.
    expect(snaps.map((s) => s.devices.map((d) => d.memoryRc))).toEqual([[0, 0], [0, 10], [0, 0]]);
  });

  it('a timeline entry can replace the fault list, and "all" changes every device', async () => {
    const file = writeScenario({
      devices: [simDevice(0), simDevice(1)],
      timeline: [
        { atCall: 1, function: 'nvmlDeviceGetCount_v2', set: { faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', device: 0, return: 3 }] } },
        { atCall: 2, function: 'nvmlDeviceGetCount_v2', device: 'all', set: { memory: { usedBytes: GiB } } },
        { atCall: 2, function: 'nvmlDeviceGetCount_v2', set: { faults: [] } },
      ],
    });
    const snaps = await dump(file, ['--repeat', '3']);
    expect(snaps.map((s) => s.devices.map((d) => d.memoryRc))).toEqual([[0, 0], [3, 0], [0, 0]]);
    expect(snaps.map((s) => s.devices.map((d) => d.memory?.usedBytes))).toEqual([[0, 0], [undefined, 0], [GiB, GiB]]);
  });

  it('a fault on nvmlInit_v2 makes init fail with that code and leaves the library uninitialised', async () => {
    const file = writeScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlInit_v2', return: 18, untilCall: 1 }] });
    const result = await runClient(['--lib', simLibraryPath(), 'dump'], simEnv(file));
    expect(result.code).toBe(3);
    expect(result.stdout.trim()).toBe('init-failed rc=18 lastError=');
    expect(result.stderr).toBe('');
  });

  it('delayMs delays the answer; hang blocks that call forever while other threads keep working', async () => {
    const delayed = writeScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', delayMs: 300 }] });
    const started = Date.now();
    await dump(delayed);
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);

    const hung = writeScenario({ devices: [simDevice(0), simDevice(1)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', device: 1, hang: true }] });
    const result = await runClient(['--lib', simLibraryPath(), 'threads', '1'], simEnv(hung));
    expect(result.stdout.trim()).toBe('main-thread-reads-ok=100 side-thread-done=0');
  });

  it('kernelBlock writes one byte per call it hits and the call then answers normally; a file it cannot write answers UNKNOWN (999)', async () => {
    const block = path.join(dir, 'kernel-block');
    const file = writeScenario({ devices: [simDevice(0), simDevice(1)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', device: 1, kernelBlock: block }] });
    const snaps = await dump(file, ['--repeat', '3']);
    expect(snaps.map((s) => s.devices.map((d) => d.memoryRc))).toEqual([[0, 0], [0, 0], [0, 0]]);
    expect(fs.readFileSync(block, 'utf8')).toHaveLength(3);
    expect(fs.statSync(block).mode & 0o777).toBe(0o600);

    // A symbolic link at the path is never followed, and a missing directory is no crash either.
    const target = path.join(dir, 'link-target');
    fs.writeFileSync(target, '');
    const link = path.join(dir, 'kernel-block-link');
    fs.symlinkSync(target, link);
    for (const unwritable of [link, path.join(dir, 'no-such-dir', 'block')]) {
      const scenario = writeScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', kernelBlock: unwritable }] });
      const result = await runClient(['--lib', simLibraryPath(), 'dump'], simEnv(scenario));
      expect(result.code).toBe(0);
      expect((JSON.parse(result.stdout) as Dump).devices[0]?.memoryRc).toBe(999);
      expect(result.stderr).toMatch(new RegExp(`^gpugate-sim: kernelBlock: cannot open ${unwritable.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(.+\\); the call answers NVML_ERROR_UNKNOWN\n$`));
    }
    expect(fs.readFileSync(target, 'utf8')).toBe('');
    const device = writeScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', kernelBlock: '/dev/null' }] });
    const refused = await runClient(['--lib', simLibraryPath(), 'dump'], simEnv(device));
    expect((JSON.parse(refused.stdout) as Dump).devices[0]?.memoryRc).toBe(999);
    expect(refused.stderr).toBe('gpugate-sim: kernelBlock: /dev/null is not a regular file; the call answers NVML_ERROR_UNKNOWN\n');
  });

  it('crash kills the calling process with the named signal instead of answering', async () => {
    for (const signal of ['SIGSEGV', 'SIGABRT', 'SIGBUS'] as const) {
      const file = writeScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', crash: signal }] });
      const child = spawn(client, ['--lib', simLibraryPath(), 'dump'], { env: simEnv(file), stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
      const [code, killedBy] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
      expect({ code, killedBy }).toEqual({ code: null, killedBy: signal });
      expect(stdout).toBe(''); // it died inside the first memory read, before printing the snapshot
    }
  });

  it('re-reads the scenario when it is replaced by rename, keeping the old one when the new one is malformed', async () => {
    const file = writeScenario({ devices: [simDevice(0, { memory: { totalBytes: 80 * GiB, usedBytes: 1 * GiB } })] });
    const child = spawn(client, ['--lib', simLibraryPath(), 'interactive'], { env: simEnv(file) });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const iterator = readline.createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    const ask = async (command: string): Promise<string> => {
      child.stdin.write(`${command}\n`);
      return (await iterator.next()).value as string;
    };
    const settle = (): Promise<void> => new Promise((r) => setTimeout(r, SIM_RELOAD_SETTLE_MS));
    try {
      expect((await iterator.next()).value).toBe('ready');
      expect(await ask('mem 0')).toContain(`used=${GiB} `);
      replaceScenario(file, { devices: [simDevice(0, { memory: { totalBytes: 80 * GiB, usedBytes: 7 * GiB } })] });
      await settle();
      expect(await ask('mem 0')).toContain(`used=${7 * GiB} `);
      replaceScenario(file, '{ "devices": [ }');
      await settle();
      expect(await ask('mem 0')).toContain(`used=${7 * GiB} `);
      // stderr travels on its own pipe: give it a moment to arrive.
      for (let i = 0; i < 100 && !stderr.includes('\n'); i++) await new Promise((r) => setTimeout(r, 20));
      expect(stderr).toContain(`gpugate-sim: ${file}:1:16: expected a value`);
      expect(stderr).toContain('the previous scenario stays in effect');
    } finally {
      child.kill();
    }
  });

  it('writes per-symbol call counts to GPUGATE_SIM_STATS at shutdown', async () => {
    const statsFile = path.join(dir, 'stats.json');
    const scenario = writeScenario({ devices: [simDevice(0), simDevice(1), simDevice(2)] });
    const result = await runClient(['--lib', simLibraryPath(), '--repeat', '2', 'dump'], simEnv(scenario, { GPUGATE_SIM_STATS: statsFile }));
    expect(result.code).toBe(0);
    const stats = JSON.parse(fs.readFileSync(statsFile, 'utf8')) as { calls: Record<string, number> };
    expect(stats.calls['nvmlInit_v2']).toBe(1);
    expect(stats.calls['nvmlShutdown']).toBe(1);
    expect(stats.calls['nvmlDeviceGetCount_v2']).toBe(2);
    expect(stats.calls['nvmlDeviceGetMemoryInfo_v2']).toBe(6);
    expect(stats.calls['nvmlDeviceGetComputeRunningProcesses_v3']).toBe(6);
    expect(stats.calls['nvmlDeviceGetMemoryInfo']).toBeUndefined();
  });

  it('writes the statistics file at process exit too, when the client never shuts down', async () => {
    const statsFile = path.join(dir, 'stats-exit.json');
    const scenario = writeScenario({ devices: [simDevice(0)] });
    const result = await runClient(['--lib', simLibraryPath(), '--no-shutdown', 'dump'], simEnv(scenario, { GPUGATE_SIM_STATS: statsFile }));
    expect(result.code).toBe(0);
    const stats = JSON.parse(fs.readFileSync(statsFile, 'utf8')) as { calls: Record<string, number> };
    expect(stats.calls['nvmlInit_v2']).toBe(1);
    expect(stats.calls['nvmlShutdown']).toBeUndefined();
    expect(stats.calls['nvmlDeviceGetMemoryInfo_v2']).toBe(1);
  });

  it('a memory read costs well under a microsecond (goal: 100 ns; the bound here is generous for a noisy machine)', async () => {
    const result = await runClient(['--lib', simLibraryPath(), 'bench', '200000'], simEnv(bundledScenario('idle-8x-rtx-pro-6000')));
    const ns = Number(/nsPerCall=([\d.]+)/.exec(result.stdout)?.[1]);
    console.log(`simulator nvmlDeviceGetMemoryInfo_v2: ${ns} ns per call`);
    expect(ns).toBeGreaterThan(0);
    expect(ns).toBeLessThan(2000);
  });
});
