/**
 * Every command's `--json` document, from the built command on the simulator, in success and in
 * failure, validates against the JSON Schema the package ships for it (schemas/, with ajv), starts
 * with the current schemaVersion, and uses no field its schema does not describe (checked against a
 * closed copy of each schema: the shipped ones stay open, since minor versions add fields).
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Ajv, { type ValidateFunction } from 'ajv';
import { afterAll, describe, expect, it } from 'vitest';
import { SCHEMA_VERSION } from '../../src/cli/json-document';
import { COMMAND_NAMES, optionsFor, type CommandName } from '../../src/cli/option-table';
import { HOLDER_CLASSES } from '../../src/gate/stale';
import { cliEnv, runCli, startCli, type CliRun } from '../helpers/cli';
import { mapsHereOrInChild } from '../helpers/processes';
import { bundledScenario, freshBundledScenario, repoRoot, simDevice, simLibraryFor, writeScenario } from '../helpers/sim';

const SCHEMA_DIR = join(repoRoot(), 'schemas');
/** Which shipped schema describes each command's document. */
const SCHEMA_OF: Partial<Record<CommandName, string>> = { wait: 'gate', check: 'gate', select: 'select', status: 'status', holders: 'holders', doctor: 'doctor', bench: 'bench', systemd: 'systemd' };

const work = mkdtempSync(join(tmpdir(), 'gpugate-json-schema-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const missingLibrary = join(work, 'no-such-libnvidia-ml.so.1');

type Schema = Record<string, unknown>;

function loadSchemas(): Map<string, Schema> {
  const schemas = new Map<string, Schema>();
  for (const file of readdirSync(SCHEMA_DIR).filter((f) => f.endsWith('.schema.json'))) {
    schemas.set(file.replace(/\.schema\.json$/, ''), JSON.parse(readFileSync(join(SCHEMA_DIR, file), 'utf8')) as Schema);
  }
  return schemas;
}

/** A copy in which every object schema that lists properties allows no others. */
function closed(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closed);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    out[key] = key === 'properties' || key === 'definitions'
      ? Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, closed(v)]))
      : closed(value);
  }
  if ('properties' in out && !('additionalProperties' in out)) out['additionalProperties'] = false;
  if (typeof out['$id'] === 'string') out['$id'] = `${out['$id'] as string}:closed`;
  if (typeof out['$ref'] === 'string') out['$ref'] = (out['$ref'] as string).replace(/^(urn:gpugate:schema:\w+)/, '$1:closed');
  return out;
}

function validators(transform: (schema: unknown) => unknown): Map<string, ValidateFunction> {
  const ajv = new Ajv({ allErrors: true, strict: true, strictTypes: false });
  const schemas = loadSchemas();
  for (const schema of schemas.values()) ajv.addSchema(transform(schema) as Schema);
  const out = new Map<string, ValidateFunction>();
  for (const [name, schema] of schemas) out.set(name, ajv.getSchema((transform(schema) as { $id: string }).$id) as ValidateFunction);
  return out;
}

const open = validators((s) => s);
const strict = validators(closed);

/** Runs the command with --json last, parses its one JSON line, and checks it against its schema (open and closed). */
async function documentOf(args: string[], env: NodeJS.ProcessEnv, expectedCode: number | 'as-reported'): Promise<Record<string, unknown>> {
  return documentOfLine([...args, '--json'], env, expectedCode);
}

/** The same for a command line that holds its own --json (or --format json) wherever it stands. */
async function documentOfLine(args: string[], env: NodeJS.ProcessEnv, expectedCode: number | 'as-reported'): Promise<Record<string, unknown>> {
  return validDocument(await runCli(args, { env, killAfterMs: 60_000 }), args, expectedCode);
}

/** The one document of a finished run, checked as documentOf does. */
function validDocument(run: CliRun, args: string[], expectedCode: number | 'as-reported'): Record<string, unknown> {
  if (expectedCode !== 'as-reported') expect(run.code, `${args.join(' ')}: ${run.stderr}`).toBe(expectedCode);
  const lines = run.stdout.trim().split('\n');
  expect(lines, `${args.join(' ')}: stdout ${JSON.stringify(run.stdout)}`).toHaveLength(1);
  const document = JSON.parse(lines[0] as string) as Record<string, unknown>;
  // The document states the code the process ends with ('as-reported': the host decides it, e.g. doctor's host checks).
  expect(document['exitCode'], `${args.join(' ')}`).toBe(run.code);
  expect(Object.keys(document)[0]).toBe('schemaVersion');
  expect(document['schemaVersion']).toBe(SCHEMA_VERSION);
  const schema = SCHEMA_OF[args[0] as CommandName] as string;
  for (const [kind, validate] of [['shipped', open.get(schema)], ['closed', strict.get(schema)]] as const) {
    if (validate === undefined) throw new Error(`no schema ${schema}`);
    const valid = validate(document);
    expect(valid, `${args.join(' ')} against the ${kind} ${schema} schema: ${JSON.stringify(validate.errors, null, 1)}\n${lines[0] as string}`).toBe(true);
  }
  return document;
}

describe('the shipped JSON Schemas', () => {
  it('exist for every command that takes --json, and compile under ajv strict mode', () => {
    const withJson = COMMAND_NAMES.filter((command) => optionsFor(command).some((spec) => spec.name === 'json'));
    expect(Object.keys(SCHEMA_OF).sort()).toEqual([...withJson].sort());
    for (const name of new Set(Object.values(SCHEMA_OF))) expect(open.get(name as string)).toBeTypeOf('function');
    const common = loadSchemas().get('common') as { definitions: { schemaVersion: { pattern: string } } };
    expect(SCHEMA_VERSION).toMatch(new RegExp(common.definitions.schemaVersion.pattern));
  });

  it('are what package.json ships', () => {
    const pkg = JSON.parse(readFileSync(join(repoRoot(), 'package.json'), 'utf8')) as { files: string[]; exports: Record<string, unknown> };
    expect(pkg.files).toContain('schemas');
    expect(pkg.exports['./schemas/*']).toBe('./schemas/*');
  });

  it("list the holder classes of the classifier's catalogue, in its order", () => {
    const common = loadSchemas().get('common') as { definitions: { holderClass: { enum: string[] } } };
    expect(common.definitions.holderClass.enum).toEqual([...HOLDER_CLASSES]);
  });

  it('reject a document that breaks them (a renamed field, a wrong type)', () => {
    const validate = open.get('status') as ValidateFunction;
    const good = { schemaVersion: SCHEMA_VERSION, command: 'status', result: 'ok', exitCode: 0, takenAt: 1, selection: { source: 'all', warnings: [] },
      library: { path: 'x', driverVersion: null, nvmlVersion: null, cudaDriverVersion: null }, devices: [] };
    expect(validate(good)).toBe(true);
    expect(validate({ ...good, schemaVersion: '2.0' })).toBe(false);
    const { takenAt: _taken, ...renamed } = good;
    expect(validate({ ...renamed, takenAtMs: 1 })).toBe(false);
    expect(validate({ ...good, devices: [{ index: '0' }] })).toBe(false);
    expect((strict.get('status') as ValidateFunction)({ ...good, extra: 1 })).toBe(false);
    expect(validate({ ...good, extra: 1 })).toBe(true);
  });
});

describe('the holder owner in the schemas', () => {
  const owner = { uid: 998, user: 'vllm', startedAt: 1, ageMs: 2, argv: ['VLLM::Worker_TP6', '--tp', '8'],
    location: { unit: 'vllm.service', userManagerUid: null, container: { runtime: 'containerd', id: 'a'.repeat(64) }, pod: { uid: 'u', qosClass: 'burstable' } } };
  const holder = { pid: 1, class: 'orphan', name: 'n', comm: null, cmdline: null, usedBytes: null, gpus: [0], state: null, ppid: null, unit: null, cgroup: null, owner, reason: null };
  const document = (h: unknown): unknown => ({ schemaVersion: SCHEMA_VERSION, command: 'holders', result: 'ok', exitCode: 0, takenAt: 1, selection: { source: 'all', warnings: [] },
    unitCgroup: null, nestedPidNamespace: false, gpus: [], stale: { holders: [h], shm: null } });
  const withOwner = (change: Record<string, unknown>, location: Record<string, unknown> = {}): unknown =>
    document({ ...holder, owner: { ...owner, ...change, location: { ...owner.location, ...location } } });

  it('accept an owner, a null owner, a container of unknown runtime; reject a wrong type, a short container id, an unknown runtime or QoS class, a missing owner', () => {
    for (const validate of [open.get('holders'), strict.get('holders')] as ValidateFunction[]) {
      expect(validate(document(holder)), JSON.stringify(validate.errors)).toBe(true);
      expect(validate(document({ ...holder, owner: null }))).toBe(true);
      expect(validate(withOwner({}, { container: { runtime: null, id: 'b'.repeat(64) } }))).toBe(true);
      expect(validate(withOwner({ uid: '998' }))).toBe(false);
      expect(validate(withOwner({ argv: 'VLLM::Worker_TP6 --tp 8' }))).toBe(false);
      expect(validate(withOwner({}, { container: { runtime: 'docker', id: '3f2a9c1b7d4e' } }))).toBe(false);
      expect(validate(withOwner({}, { container: { runtime: 'lxc', id: 'a'.repeat(64) } }))).toBe(false);
      expect(validate(withOwner({}, { pod: { uid: 'u', qosClass: 'gold' } }))).toBe(false);
      const { owner: _dropped, ...without } = holder;
      expect(validate(document(without))).toBe(false);
    }
  });
});

describe('every --json document validates against its schema', () => {
  // The shared clock starts a scenario's timeline when its file was written: a fresh copy starts
  // now, so the race is still in its busy phase when the command reads it.
  const race = (): string => freshBundledScenario('restart-race');

  it('status: a plain host, MIG, a lost GPU, and NVML missing', async () => {
    for (const name of ['restart-race', 'mig', 'lost-gpu', 'r535-stride']) {
      // Each scenario through the simulator library of its driver profile (r535-stride: 535.54); a lost GPU exits 69, every GPU still listed.
      const scenario = bundledScenario(name);
      const document = await documentOf(['status'], cliEnv(scenario, { GPUGATE_NVML_LIBRARY: simLibraryFor(scenario) }), name === 'lost-gpu' ? 69 : 0);
      expect((document['devices'] as unknown[]).length).toBeGreaterThan(0);
    }
    const failed = await documentOf(['status', '--library', missingLibrary], cliEnv(null), 69);
    expect(failed).toMatchObject({ command: 'status', result: 'error', exitCode: 69 });
  });

  it('holders: gone holders, a live holder and a leaked-shm scan, and NVML missing', async () => {
    const scenario = writeScenario({ devices: [simDevice(0, { processes: [{ pid: process.pid, usedBytes: 1024 ** 3, kinds: ['compute'] }] }), simDevice(1)] });
    await documentOf(['holders'], cliEnv(scenario), 0);
    await documentOf(['holders'], cliEnv(race()), 0);
    await documentOf(['holders', '--library', missingLibrary], cliEnv(null), 69);
    expect((await documentOf(['holders'], cliEnv(bundledScenario('lost-gpu')), 69))['problems']).toEqual([expect.objectContaining({ index: 5 })]);
  });

  it('wait: ready, timed out with holders, a selector that matches nothing, NVML missing', async () => {
    const ready = await documentOf(['wait', '--stable', '0s', '--timeout', '10s'], cliEnv(bundledScenario('idle-8x-rtx-pro-6000')), 0);
    expect(ready['result']).toBe('ready');
    // The race held at its base state (its timeline anchored an hour ahead), so it cannot drain
    // however slowly a loaded machine starts the command; the deadline only has to follow the first read.
    const held = { GPUGATE_SIM_STARTED_AT: String(Date.now() + 3_600_000) };
    const timeout = await documentOf(['wait', '--min-free', '0.9', '--timeout', '2s', '--interval', '100ms'], cliEnv(race(), held), 75);
    expect(timeout['result']).toBe('timeout');
    expect(((timeout['gpus'] as Array<{ holders: unknown[] }>)[0]?.holders.length ?? 0)).toBeGreaterThan(0);
    expect((await documentOf(['wait', '--gpus', '42', '--timeout', '1s'], cliEnv(race()), 78))['result']).toBe('config-error');
    expect((await documentOf(['wait', '--library', missingLibrary, '--timeout', '1s'], cliEnv(null), 69))['result']).toBe('unavailable');
  });

  it('check: busy, ready, with a dry-run clean-up recorded in actions', async () => {
    expect((await documentOf(['check'], cliEnv(race()), 75))['result']).toBe('busy');
    expect((await documentOf(['check'], cliEnv(bundledScenario('idle-8x-rtx-pro-6000')), 0))['result']).toBe('ready');
    const dry = await documentOf(['check', '--clean-shm', 'gpugate-schema-test-none-*', '--dry-run'], cliEnv(bundledScenario('idle-8x-rtx-pro-6000')), 0);
    expect(dry['actions']).toEqual({ signals: [], shm: [] });
    // --for vllm adds what vLLM would see to each GPU, ready and busy alike.
    for (const [scenario, code] of [[bundledScenario('idle-8x-rtx-pro-6000'), 0], [race(), 75]] as const) {
      const engine = await documentOf(['check', '--for', 'vllm', '--min-free', '0.9'], cliEnv(scenario), code);
      expect((engine['gpus'] as Array<{ engineView: { engine: string } | null }>).every((gpu) => gpu.engineView?.engine === 'vllm')).toBe(true);
    }
  });

  it('doctor: a healthy host, a degraded one with Xids, a lost GPU, and NVML missing', async () => {
    const kernelLog = join(work, 'kernel.log');
    writeFileSync(kernelLog, '[ 812.4] NVRM: Xid (PCI:0000:3a:00): 48, pid=91342, name=python3, An uncorrectable double bit error\n');
    const emptyLog = join(work, 'empty.log');
    writeFileSync(emptyLog, '');
    const healthy = await documentOf(['doctor', '--kernel-log', emptyLog], cliEnv(bundledScenario('idle-8x-rtx-pro-6000')), 'as-reported');
    expect((healthy['checks'] as unknown[]).length).toBeGreaterThan(8 * 10);
    const degraded = await documentOf(['doctor', '--kernel-log', kernelLog], cliEnv(bundledScenario('degraded-host')), 69);
    expect(degraded['result']).toBe('fail');
    expect((degraded['checks'] as Array<{ id: string }>).map((c) => c.id)).toContain('kernel.xid-48');
    await documentOf(['doctor', '--kernel-log', kernelLog], cliEnv(bundledScenario('lost-gpu')), 69);
    const missing = await documentOf(['doctor', '--library', missingLibrary, '--kernel-log', kernelLog], cliEnv(null), 69);
    expect(missing).toMatchObject({ library: null, gpuCount: 0, result: 'fail' });
  });

  it('select: selected and leased, busy, more GPUs than exist, NVML missing', async () => {
    const leases = { GPUGATE_LEASE_DIR: join(work, 'leases') };
    const idle = bundledScenario('idle-8x-rtx-pro-6000');
    const selected = await documentOf(['select', '--count', '2'], cliEnv(idle, leases), 0);
    expect(selected['result']).toBe('selected');
    expect((selected['gpus'] as Array<{ lease: unknown }>).map((gpu) => gpu.lease)).not.toContain(null);
    expect(selected['cudaVisibleDevices']).toMatch(/^GPU-[^,]+,GPU-[^,]+$/);
    const busy = await documentOf(['select', '--count', '1'], cliEnv(race(), leases), 75);
    expect(busy['result']).toBe('busy');
    expect((busy['candidates'] as Array<{ gpu: unknown }>).every((candidate) => candidate.gpu !== null)).toBe(true);
    expect((await documentOf(['select', '--count', '9', '--no-lease'], cliEnv(idle, leases), 78))['result']).toBe('config-error');
    expect((await documentOf(['select', '--count', '1', '--library', missingLibrary], cliEnv(null, leases), 69))['result']).toBe('unavailable');
  });

  it('systemd: printed, written, and a unit that does not exist', async () => {
    const units = join(work, 'units');
    mkdirSync(units, { recursive: true });
    mkdirSync(join(work, 'root', 'etc', 'systemd', 'system'), { recursive: true });
    writeFileSync(join(units, 'llm.service'), '[Service]\nExecStart=/usr/bin/vllm serve m --gpu-memory-utilization 0.85\nRestart=on-failure\nRestartSec=10\n');
    expect(await documentOf(['systemd', '--unit', 'llm', '--unit-path', units], cliEnv(null), 0)).toMatchObject({ minFree: 0.85, written: null });
    const written = await documentOf(['systemd', '--unit', 'llm', '--unit-path', units, '--write', '--root', join(work, 'root')], cliEnv(null), 0);
    expect(written['written']).toBe('created');
    expect((await documentOf(['systemd', '--unit', 'nope', '--unit-path', units], cliEnv(null), 78))['result']).toBe('error');
  });

  it('bench: measured, and NVML missing', async () => {
    const document = await documentOf(['bench', '--iterations', '3', '--duration', '5s'], cliEnv(race()), 0);
    expect(document['deviceCount']).toBe(8);
    await documentOf(['bench', '--library', missingLibrary], cliEnv(null), 69);
  });
});

/** A command line, a scenario, the exit code it must end with and the `result` its document must state. */
type FailureCase = [args: string[], scenario: 'race' | 'none', code: number, result: string];

/** For each command that takes --json: the refusals that end it before its outcome. */
const FAILURES: Readonly<Partial<Record<CommandName, FailureCase[]>>> = {
  wait: [
    [['wait', '--bogus', '--json'], 'race', 64, 'usage-error'],
    [['wait', '--json', '--timeout'], 'race', 64, 'usage-error'],
    [['wait', '--json', '--timeout', 'soon'], 'race', 64, 'usage-error'],
    [['wait', '-q', '-v', '--json'], 'race', 64, 'usage-error'],
    [['wait', '--json', '--min-free', '150%'], 'race', 78, 'config-error'],
    // Words after `--` are the wrapped command's: its --bogus is not gpugate's, and a timeout runs nothing.
    [['wait', '--json', '--min-free', '0.9', '--timeout', '300ms', '--interval', '100ms', '--', 'false', '--bogus'], 'race', 75, 'timeout'],
  ],
  check: [
    [['check', '--json', '--stale', 'maybe'], 'race', 64, 'usage-error'],
    [['check', 'extra', '--json'], 'race', 64, 'usage-error'],
    [['check', '--gpus', '', '--json'], 'race', 78, 'no-gpu-selected'],
    [['check', '--for', 'vllm', '--min-free', '0%', '--json'], 'race', 78, 'config-error'],
    [['check', '--json', '--library', 'no-such-libnvidia-ml.so.1'], 'none', 69, 'unavailable'],
  ],
  select: [
    [['select', '--json'], 'race', 64, 'usage-error'],
    [['select', '--format=json', '--count', 'two'], 'race', 64, 'usage-error'],
    [['select', '--count', '1', '--format', 'json', '--bogus'], 'race', 64, 'usage-error'],
  ],
  status: [
    [['status', '--bogus', '--json'], 'race', 64, 'error'],
    [['status', '--json', '--format', 'prometheus'], 'race', 64, 'error'],
    [['status', '--format', 'json', '--gpus', '42'], 'race', 78, 'error'],
  ],
  holders: [
    [['holders', '--json', '--nvml-timeout', '0s'], 'race', 64, 'error'],
    [['holders', '--gpus', '', '--json'], 'race', 78, 'error'],
  ],
  doctor: [
    [['doctor', '--json', '--unit-path', 'units'], 'race', 64, 'error'],
    [['doctor', '--kernel-log', '', '--json'], 'race', 64, 'error'],
  ],
  bench: [
    [['bench', '--iterations', 'many', '--json'], 'race', 64, 'error'],
  ],
  systemd: [
    [['systemd', '--json'], 'none', 64, 'error'],
    [['systemd', '--json', '--unit', 'llm', '--root', 'r'], 'none', 64, 'error'],
  ],
};

describe('--json on every exit', () => {
  it('covers every command that takes --json', () => {
    expect(Object.keys(FAILURES).sort()).toEqual(Object.keys(SCHEMA_OF).sort());
  });

  for (const [command, cases] of Object.entries(FAILURES)) {
    it(`${command}: one document that validates, states the exit code and names the failure, wherever --json stands`, async () => {
      for (const [args, scenario, code, result] of cases) {
        const env = scenario === 'race' ? cliEnv(freshBundledScenario('restart-race')) : cliEnv(null);
        const document = await documentOfLine(args, env, code);
        expect(document['result'], args.join(' ')).toBe(result);
        expect(document['command']).toBe(command);
        if (code !== 75) expect((document['error'] as { message: string } | null)?.message, args.join(' ')).toBeTruthy();
      }
    });
  }

  it('a command without a gate of its own, interrupted while NVML hangs: its failure document with 143 / 130 / 129', async () => {
    // Every memory query hangs: the command is inside NVML when the signal comes.
    const scenario = writeScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', hang: true }] });
    for (const [command, signal, code] of [['status', 'SIGTERM', 143], ['holders', 'SIGINT', 130], ['status', 'SIGHUP', 129]] as const) {
      const args = [command, '--json', '--nvml-timeout', '10m'];
      const cli = startCli(args, { env: cliEnv(scenario), killAfterMs: 60_000 });
      // The simulator is mapped once the command has started its work: its signal watch is in place.
      await mappedLibrary(cli.child.pid as number, 'gpugate_sim');
      cli.child.kill(signal);
      const document = validDocument(await cli.done, args, code);
      expect(document).toMatchObject({ command, result: 'error', error: { name: 'AbortError', message: `interrupted by ${signal}` } });
    }
  });

  it('prints no document without --json, and none for --help', async () => {
    const env = cliEnv(freshBundledScenario('restart-race'));
    const usage = await runCli(['status', '--bogus'], { env });
    expect([usage.code, usage.stdout]).toEqual([64, '']);
    const help = await runCli(['status', '--help', '--json'], { env });
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: gpugate status/m);
  });
});

/** Resolves once process `pid` or its NVML helper child has mapped a file whose name contains `name` (polled: /proc has no notification). */
async function mappedLibrary(pid: number, name: string): Promise<void> {
  for (let tries = 0; tries < 3000; tries++) {
    if (!existsSync(`/proc/${pid}`)) throw new Error(`process ${pid} ended before it mapped ${name}`);
    if (mapsHereOrInChild(pid, name)) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`process ${pid} never mapped ${name}`);
}
