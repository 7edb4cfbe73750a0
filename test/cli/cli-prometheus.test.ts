/**
 * `--format prometheus` read by the consumers that read it in production: Prometheus' own linter
 * (`promtool check metrics`, Debian package prometheus) and both parsers of the Python client
 * (prometheus_client's Prometheus text parser and its OpenMetrics parser, Debian package
 * python3-prometheus-client). Each metric is one family (HELP and TYPE once, every GPU's sample in
 * it); NVML failing still writes an exposition (`gpugate_up 0` with the error) that replaces an
 * older file through --output; a lost GPU is labelled by index and its last known UUID. A consumer
 * that is not installed makes its test skip with the reason printed (.ci/run installs both).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { cgroupUnavailable, makeServiceCgroup } from '../helpers/cgroups';
import { cliEnv, runCli } from '../helpers/cli';
import { killSpawned, spawnSleeper } from '../helpers/processes';
import { bundledScenario, simDevice, writeScenario } from '../helpers/sim';

const work = mkdtempSync(join(tmpdir(), 'gpugate-cli-prometheus-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/**
 * The Python with prometheus_client: Debian's package installs it for the system's interpreter,
 * which a version manager's `python3` earlier on PATH (pyenv) does not see.
 */
const PYTHON = ['python3', '/usr/bin/python3'].find(
  (python) => spawnSync(python, ['-c', 'import prometheus_client.parser, prometheus_client.openmetrics.parser'], { encoding: 'utf8' }).status === 0,
);

function missingConsumer(): string | null {
  const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
  if (promtool.error !== undefined || promtool.status !== 0) return 'promtool is not installed (Debian package prometheus)';
  if (PYTHON === undefined) return 'python3 prometheus_client is not installed (Debian package python3-prometheus-client)';
  return null;
}
const missing = missingConsumer();
if (missing !== null) console.warn(`skipping the real-consumer checks of the Prometheus output: ${missing}`);

/** promtool check metrics on `text`: its exit code and what it said. */
function promtool(text: string): { status: number | null; output: string } {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

interface ParsedFamily { name: string; type: string; samples: Array<{ name: string; labels: Record<string, string>; value: number }> }

/** Parses `text` with prometheus_client's parser ('text' or 'openmetrics'); throws with its error. */
function pythonParse(text: string, parser: 'text' | 'openmetrics'): ParsedFamily[] {
  const module = parser === 'text' ? 'prometheus_client.parser' : 'prometheus_client.openmetrics.parser';
  const code = [
    'import json, sys, math',
    `from ${module} import text_string_to_metric_families`,
    'out = []',
    'for f in text_string_to_metric_families(sys.stdin.read()):',
    '    out.append({"name": f.name, "type": f.type, "samples": [{"name": s.name, "labels": s.labels, "value": s.value} for s in f.samples]})',
    'print(json.dumps(out))',
  ].join('\n');
  const r = spawnSync(PYTHON!, ['-c', code], { input: text, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`prometheus_client ${parser} parser rejected the output:\n${r.stderr}\n--- output ---\n${text}`);
  return JSON.parse(r.stdout) as ParsedFamily[];
}

/** Checks `text` with all three consumers and returns the families as the OpenMetrics parser saw them. */
function readByEveryConsumer(text: string): ParsedFamily[] {
  const lint = promtool(text);
  expect(lint.output).toBe('');
  expect(lint.status).toBe(0);
  const prometheus = pythonParse(text, 'text');
  const openmetrics = pythonParse(text, 'openmetrics');
  // Both parsers see the same families, each name once, every one a gauge.
  const names = openmetrics.map((f) => f.name);
  expect(new Set(names).size).toBe(names.length);
  expect(prometheus.map((f) => f.name)).toEqual(names);
  expect(prometheus.map((f) => f.samples.length)).toEqual(openmetrics.map((f) => f.samples.length));
  for (const family of openmetrics) expect(family.type).toBe('gauge');
  return openmetrics;
}

function family(families: ParsedFamily[], name: string): ParsedFamily {
  const found = families.find((f) => f.name === name);
  if (found === undefined) throw new Error(`no family ${name} in ${families.map((f) => f.name).join(', ')}`);
  return found;
}

describe.skipIf(missing !== null)('the Prometheus output, read by promtool and prometheus_client', () => {
  it('status on 8 GPUs: one family per metric, a sample per GPU, with utilisation, temperature and power', async () => {
    const run = await runCli(['status', '--format', 'prometheus'], { env: cliEnv(bundledScenario('restart-race')) });
    expect(run.code).toBe(0);
    expect(run.stdout.match(/^# TYPE gpugate_gpu_memory_used_bytes /gm)).toHaveLength(1);
    expect(run.stdout.endsWith('# EOF\n')).toBe(true);
    const families = readByEveryConsumer(run.stdout);
    expect(family(families, 'gpugate_up').samples).toEqual([{ name: 'gpugate_up', labels: {}, value: 1 }]);
    for (const name of ['gpugate_gpu_memory_used_bytes', 'gpugate_gpu_up', 'gpugate_gpu_utilization_ratio',
      'gpugate_gpu_temperature_celsius', 'gpugate_gpu_power_watts', 'gpugate_gpu_info']) {
      expect(family(families, name).samples.map((s) => s.labels['gpu'])).toEqual(['0', '1', '2', '3', '4', '5', '6', '7']);
    }
    const scenario = JSON.parse(readFileSync(bundledScenario('restart-race'), 'utf8')) as { devices: Array<{ uuid: string; temperatureC: number; powerWatts: number }> };
    const temperature = family(families, 'gpugate_gpu_temperature_celsius').samples;
    expect(temperature.map((s) => s.value)).toEqual(scenario.devices.map((d) => d.temperatureC));
    expect(temperature.map((s) => s.labels['uuid'])).toEqual(scenario.devices.map((d) => d.uuid));
    expect(family(families, 'gpugate_gpu_power_watts').samples.map((s) => s.value)).toEqual(scenario.devices.map((d) => d.powerWatts));
  });

  it('holders: every class is a series of one gpugate_gpu_holders family', async () => {
    const scenario = writeScenario({
      devices: [0, 1].map((i) => simDevice(i, { processes: [{ pid: 4_000_000 + i, usedBytes: 1024 ** 3, kinds: ['compute'] }] })),
    });
    const run = await runCli(['holders', '--format', 'prometheus'], { env: cliEnv(scenario) });
    expect(run.code).toBe(0);
    const holders = family(readByEveryConsumer(run.stdout), 'gpugate_gpu_holders').samples;
    expect(holders).toHaveLength(2 * 9);
    expect(holders.filter((s) => s.labels['class'] === 'gone').map((s) => [s.labels['gpu'], s.value])).toEqual([['0', 1], ['1', 1]]);
  });

  const cgroupHierarchy = cgroupUnavailable('named') === null ? 'named' : cgroupUnavailable('unified') === null ? 'unified' : null;
  const cleanups: Array<() => void> = [];
  afterEach(async () => {
    await killSpawned();
    for (const cleanup of cleanups.splice(0).reverse()) cleanup();
  });

  it.skipIf(cgroupHierarchy === null)('holders: counts per class and unit, in one family, a unit name with a quote and a backslash escaped', async () => {
    const plain = makeServiceCgroup(cgroupHierarchy!, 'gpugate-test-serve', cleanups).unit;
    const odd = makeServiceCgroup(cgroupHierarchy!, 'gpugate-test-q"uote\\back', cleanups).unit;
    const pids = await Promise.all([spawnSleeper('VLLM::Worker_TP0'), spawnSleeper('VLLM::Worker_TP1'), spawnSleeper('VLLM::Worker_TP2')]);
    plain.join(pids[0]!);
    plain.join(pids[1]!);
    odd.join(pids[2]!);
    const scenario = writeScenario({ devices: [simDevice(0, { processes: pids.map((pid) => ({ pid, usedBytes: 1024 ** 3 })) }), simDevice(1)] });
    const run = await runCli(['holders', '--format', 'prometheus'], { env: cliEnv(scenario) });
    expect(run.code).toBe(0);
    expect(run.stdout.match(/^# TYPE gpugate_gpu_holders /gm)).toHaveLength(1);
    const samples = family(readByEveryConsumer(run.stdout), 'gpugate_gpu_holders').samples;
    const plainUnit = plain.path.split('/').pop()!;
    const oddUnit = odd.path.split('/').pop()!;
    expect(oddUnit).toContain('"');
    const active = samples.filter((s) => s.labels['gpu'] === '0' && s.labels['class'] === 'active');
    expect(active.map((s) => [s.labels['unit'], s.value])).toEqual([['', 0], [plainUnit, 2], [oddUnit, 1]].sort((a, b) => (a[0]! < b[0]! ? -1 : 1)));
    // Every class keeps its series of holders without a unit; GPU 1 has nothing else.
    expect(samples.filter((s) => s.labels['gpu'] === '1').map((s) => [s.labels['class'], s.labels['unit'], s.value])).toEqual(
      ['active', 'draining', 'zombie', 'zombie_live_threads', 'gone', 'unverifiable', 'leftover', 'orphan', 'foreign'].map((name) => [name, '', 0]));
    expect(run.stdout).toContain(`unit="${oddUnit.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"} 1`);
  });

  it('NVML failing still writes an exposition (gpugate_up 0 with the error) that replaces an older file, and exits 69', async () => {
    const target = join(work, 'failing.prom');
    writeFileSync(target, 'gpugate_gpu_memory_used_bytes{gpu="0",uuid="GPU-old"} 1\n');
    const run = await runCli(['status', '--format', 'prometheus', '--output', target, '--library', join(work, 'no-such-libnvidia-ml.so.1')], { env: cliEnv(null) });
    expect(run.code).toBe(69);
    expect(run.stdout).toBe('');
    const text = readFileSync(target, 'utf8');
    expect(text).not.toContain('GPU-old');
    const up = family(readByEveryConsumer(text), 'gpugate_up').samples;
    expect(up).toHaveLength(1);
    expect(up[0]?.value).toBe(0);
    expect(up[0]?.labels['error']).toMatch(/^[A-Z_]+$/);
    expect(up[0]?.labels['message']).toContain('no-such-libnvidia-ml.so.1');
    // On stdout too, for the shell recipe (`> file.$$; mv file.$$ file`).
    const plain = await runCli(['holders', '--format', 'prometheus', '--library', join(work, 'no-such-libnvidia-ml.so.1')], { env: cliEnv(null) });
    expect(plain.code).toBe(69);
    expect(family(readByEveryConsumer(plain.stdout), 'gpugate_up').samples[0]?.value).toBe(0);
  });

  it('a lost GPU is labelled by its index and the UUID the replaced file last recorded for it, never uuid=""', async () => {
    const lost = JSON.parse(readFileSync(bundledScenario('lost-gpu'), 'utf8')) as { devices: Array<{ uuid: string }>; faults?: unknown };
    const healthy = { ...lost };
    delete healthy.faults;
    const target = join(work, 'lost.prom');
    const before = await runCli(['status', '--format', 'prometheus', '--output', target], { env: cliEnv(writeScenario(healthy as never)) });
    expect(before.code).toBe(0);
    const uuid5 = lost.devices[5]?.uuid as string;
    expect(readFileSync(target, 'utf8')).toContain(`uuid="${uuid5}"`);

    // The file is written, and the command exits 69 as for any lost GPU (docs/cli.md, exit codes).
    const after = await runCli(['status', '--format', 'prometheus', '--output', target], { env: cliEnv(bundledScenario('lost-gpu')) });
    expect(after.code).toBe(69);
    const text = readFileSync(target, 'utf8');
    expect(text).not.toContain('uuid=""');
    const families = readByEveryConsumer(text);
    const up5 = family(families, 'gpugate_gpu_up').samples.find((s) => s.labels['gpu'] === '5');
    expect(up5).toEqual({ name: 'gpugate_gpu_up', labels: { gpu: '5', uuid: uuid5, error: 'NVML_ERROR_GPU_IS_LOST' }, value: 0 });
    expect(family(families, 'gpugate_gpu_memory_used_bytes').samples.map((s) => s.labels['gpu'])).toEqual(['0', '1', '2', '3', '4', '6', '7']);
    // Without a file to remember it by, the index alone.
    const plain = await runCli(['status', '--format', 'prometheus'], { env: cliEnv(bundledScenario('lost-gpu')) });
    expect(plain.stdout).not.toContain('uuid=""');
    expect(plain.stdout).toContain('gpugate_gpu_up{gpu="5",error="NVML_ERROR_GPU_IS_LOST"} 0');
    readByEveryConsumer(plain.stdout);
  });

  it('refuses --output without --format prometheus (exit 64)', async () => {
    const run = await runCli(['status', '--output', join(work, 'x.prom')], { env: cliEnv(bundledScenario('restart-race')) });
    expect(run.code).toBe(64);
    expect(run.stderr).toContain('--format prometheus');
  });
});


