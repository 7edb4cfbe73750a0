/**
 * `gpugate systemd` never writes a unit worse than the one it found: a gate that an idle GPU of
 * this host (the simulator's scenario, read through the real addon) can pass, even for a high
 * --gpu-memory-utilization; NotifyAccess= only ever widened; an explicit "no start limit" kept;
 * node started with --disable-sigusr1; and an ExecStartPre= line that systemd's own loader
 * (`systemd-analyze verify`) reads back word for word whatever characters the node and gpugate
 * paths hold. `gpugate doctor --unit` fails a gate no idle GPU can pass.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, linkSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildDropIn } from '../../src/cli/systemd-drop-in';
import { parseExecLine } from '../../src/host/systemd-exec-line';
import { readUnitProperties } from '../../src/host/systemd-unit';
import { cliEnv, cliPath, parseJsonOutput, runCli, type CliRun } from '../helpers/cli';
import { bundledScenario, simLibraryFor } from '../helpers/sim';
import { haveSystemdAnalyze, systemdDump } from '../helpers/systemd-dump';
import { makeTestTempDir } from '../helpers/temp-root';
import { logText } from '../helpers/log-lines';

const scenario = bundledScenario('idle-8x-rtx-pro-6000');
const env = cliEnv(scenario, { GPUGATE_NVML_LIBRARY: simLibraryFor(scenario) });
const unitText = (utilization: string, extra = ''): string =>
  `[Service]\nExecStart=/usr/bin/vllm serve m --gpu-memory-utilization ${utilization}\nRestart=on-failure\nRestartSec=10\n${extra}`;

function makeRoot(units: Record<string, string>): { root: string; dir: string } {
  const root = makeTestTempDir('gpugate-systemd-fit-');
  const dir = join(root, 'etc', 'systemd', 'system');
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(units)) writeFileSync(join(dir, name), text);
  return { root, dir };
}

function systemd(args: string[], runEnv: NodeJS.ProcessEnv = env): Promise<CliRun> {
  return runCli(['systemd', ...args], { env: runEnv });
}

/** The gate's words after main.js (`wait --min-free …`), as systemd would pass them. */
function gateArgs(dropIn: string): string[] {
  const line = /^ExecStartPre=(.*)$/m.exec(dropIn)?.[1];
  if (line === undefined) throw new Error(`no ExecStartPre= in:\n${dropIn}`);
  const argv = parseExecLine(line)?.[0]?.argv ?? [];
  return argv.slice(argv.indexOf('wait'));
}

interface Check { id: string; subject: string; status: string; summary: string; evidence: Record<string, unknown>; advice?: string }

async function doctorUnit(dir: string): Promise<Check[]> {
  const log = join(dir, '..', 'empty.log');
  writeFileSync(log, '');
  const run = await runCli(['doctor', '--json', '--kernel-log', log, '--unit', 'llm', '--unit-path', dir], { env, killAfterMs: 60_000 });
  return (parseJsonOutput(run) as unknown as { checks: Check[] }).checks.filter((c) => c.subject.startsWith('unit '));
}

describe('a gate an idle GPU of this host can pass (--gpu-memory-utilization 0.98)', () => {
  it('the standard 2GiB margin cannot pass on the idle simulated GPU: gpugate check exits 78 (the attack)', async () => {
    const run = await runCli(['check', '--min-free', '0.98', '--margin', '2GiB'], { env });
    expect(run.code).toBe(78);
    expect(logText(run.stderr)).toContain('free but the GPU has only');
  });

  it('gpugate systemd shrinks the margin to what fits, says why, and the written gate really passes on the idle GPUs', async () => {
    const { dir } = makeRoot({ 'llm.service': unitText('0.98') });
    const run = await systemd(['--unit', 'llm', '--unit-path', dir]);
    expect(run.code, run.stderr).toBe(0);
    // 95.6 GiB total − 471 MiB reserved − 1 GiB idle baseline − what vLLM at 0.98 needs
    // (ceil(0.98 × (total − reserved)) and its 555 MiB CUDA context on an RTX PRO 6000), in whole MiB.
    const total = 102_641_958_912;
    const vllmNeeds = Math.ceil(0.98 * (total - 493_879_296)) + 555 * 1024 ** 2;
    const room = Math.floor((total - 493_879_296 - 1024 ** 3 - vllmNeeds) / 1024 ** 2);
    expect(run.stdout).toContain(`--for vllm --min-free 0.98 --margin ${room}MiB `);
    expect(logText(run.stderr)).toContain(`--margin ${room}MiB instead of 2GiB: GPU 0 has 95.6GiB in total, 471MiB reserved, 1GiB counted as used at idle`);
    const gate = await runCli([...gateArgs(run.stdout), '--timeout', '20s'], { env });
    expect(gate.code, gate.stderr).toBe(0);
    const json = parseJsonOutput(await systemd(['--unit', 'llm', '--unit-path', dir, '--json']));
    expect(json).toMatchObject({ margin: `${room}MiB`, gpus: expect.arrayContaining([{ index: 0, totalBytes: total, reservedBytes: 493_879_296 }]), kept: [expect.stringContaining(`--margin ${room}MiB`)] });
  });

  it('keeps the 2GiB margin where it fits (0.9)', async () => {
    const { dir } = makeRoot({ 'llm.service': unitText('0.9') });
    const run = await systemd(['--unit', 'llm', '--unit-path', dir]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('--min-free 0.9 --margin 2GiB ');
    expect(logText(run.stderr)).not.toContain('instead of 2GiB');
  });

  it('refuses with 78, naming the numbers, a fraction no idle GPU can offer even without a margin (0.995)', async () => {
    const { root, dir } = makeRoot({ 'llm.service': unitText('0.995') });
    const run = await systemd(['--unit', 'llm', '--unit-path', dir, '--write', '--root', root]);
    expect(run.code).toBe(78);
    expect(logText(run.stderr)).toMatch(/--gpu-memory-utilization 0\.995 asks more than an idle GPU of this host offers \(GPU 0 has 95\.6GiB in total, 471MiB reserved, 1GiB counted as used at idle: 94\.1GiB free when idle, and vLLM at 0\.995 needs 95\.2GiB \(0\.995 of total less reserved, plus its 555MiB CUDA context\)\)/);
    expect(existsSync(join(dir, 'llm.service.d'))).toBe(false);
  });

  it('without NVML it still prints the drop-in, and says its gate was not checked against any GPU', async () => {
    const { dir } = makeRoot({ 'llm.service': unitText('0.98') });
    const run = await systemd(['--unit', 'llm', '--unit-path', dir], cliEnv(null));
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('--min-free 0.98 --margin 2GiB ');
    expect(logText(run.stderr)).toContain('was not checked against this host\'s GPUs, since NVML could not be read');
    expect(logText(run.stderr)).toContain('gpugate doctor --unit llm.service checks that an idle GPU can pass it');
  });

  it('doctor --unit fails the impossible gate (unit.gate-passable) and passes the one gpugate systemd writes', async () => {
    const { root, dir } = makeRoot({ 'llm.service': unitText('0.98') });
    mkdirSync(join(dir, 'llm.service.d'));
    writeFileSync(join(dir, 'llm.service.d', 'old.conf'), '[Service]\nExecStartPre=/usr/bin/gpugate wait --min-free 0.98 --margin 2GiB --timeout 240s\n');
    const before = (await doctorUnit(dir)).find((c) => c.id === 'unit.gate-passable');
    expect(before).toMatchObject({ status: 'fail', summary: expect.stringMatching(/^the gate needs 95\.7GiB free on GPU 0, but idle it offers only 94\.1GiB/), advice: expect.stringContaining('lower the gate\'s --margin to') });
    writeFileSync(join(dir, 'llm.service.d', 'old.conf'), '');
    expect((await systemd(['--unit', 'llm', '--unit-path', dir, '--write', '--root', root])).code).toBe(0);
    const after = await doctorUnit(dir);
    expect(after.find((c) => c.id === 'unit.gate-passable')).toMatchObject({ status: 'pass' });
    expect(after.filter((c) => c.status !== 'pass')).toEqual([]);
  });
});

describe('settings of the unit that the drop-in keeps', () => {
  it('keeps NotifyAccess=all (never narrows it to exec), says so, and systemd still loads all', async () => {
    const { root, dir } = makeRoot({ 'llm.service': unitText('0.85', 'Type=notify\nNotifyAccess=all\n') });
    const run = await systemd(['--unit', 'llm', '--unit-path', dir, '--write', '--root', root]);
    expect(run.code, run.stderr).toBe(0);
    const written = readFileSync(join(dir, 'llm.service.d', 'gpugate.conf'), 'utf8');
    expect(written).not.toMatch(/^NotifyAccess=/m);
    expect(logText(run.stderr)).toContain('kept NotifyAccess=all: it already lets gpugate send STATUS=, and narrowing it to exec would drop');
    expect((await readUnitProperties('llm.service', { kind: 'unit-files', directory: dir })).notifyAccess).toBe('all');
    if (haveSystemdAnalyze()) expect(systemdDump(root, 'llm.service').fields.get('NotifyAccess')).toBe('all');
  });

  it('widens NotifyAccess=main to exec', async () => {
    const { dir } = makeRoot({ 'llm.service': unitText('0.85', 'Type=notify\nNotifyAccess=main\n') });
    const run = await systemd(['--unit', 'llm', '--unit-path', dir]);
    expect(run.stdout).toMatch(/^NotifyAccess=exec$/m);
    expect(logText(run.stderr)).not.toContain('kept NotifyAccess');
  });

  it('keeps an explicit StartLimitIntervalSec=0 (no limit), says so, and prints the same text once written', async () => {
    const { root, dir } = makeRoot({ 'llm.service': `[Unit]\nStartLimitIntervalSec=0\n${unitText('0.85')}` });
    const printed = await systemd(['--unit', 'llm', '--unit-path', dir]);
    expect(printed.code, printed.stderr).toBe(0);
    expect(printed.stdout).not.toMatch(/^StartLimit/m);
    expect(logText(printed.stderr)).toContain('kept the unit\'s start limit off (StartLimitIntervalSec=0, StartLimitBurst=5): an explicit "no limit" is the admin\'s choice');
    expect((await systemd(['--unit', 'llm', '--unit-path', dir, '--write', '--root', root])).code).toBe(0);
    expect((await readUnitProperties('llm.service', { kind: 'unit-files', directory: dir })).startLimitIntervalUsec).toBe(0);
    expect((await systemd(['--unit', 'llm', '--unit-path', dir])).stdout).toBe(printed.stdout);
    const json = parseJsonOutput(await systemd(['--unit', 'llm', '--unit-path', dir, '--json']));
    expect(json).toMatchObject({ startLimitIntervalSec: 0, startLimitBurst: 5, notifyAccess: 'exec', kept: [expect.stringContaining('start limit off')] });
  });
});

const analyze = haveSystemdAnalyze();
const inCi = process.env.CI === 'true';

describe.skipIf(!analyze && !inCi)('the ExecStartPre= line, read back by systemd-analyze verify', () => {
  /** A root with the system's units, the unit's vllm, and stand-ins for node and gpugate's main.js at `base` (verify insists the program exists). */
  function verifiableRoot(base: string): { root: string; dir: string; node: string; main: string } {
    const made = makeRoot({ 'llm.service': unitText('0.85') });
    const systemUnits = ['/usr/lib/systemd/system', '/lib/systemd/system'].find((d) => existsSync(join(d, 'sysinit.target')));
    if (systemUnits === undefined) throw new Error('no system unit directory with sysinit.target found');
    mkdirSync(join(made.root, 'usr', 'lib', 'systemd'), { recursive: true });
    cpSync(systemUnits, join(made.root, 'usr', 'lib', 'systemd', 'system'), { recursive: true, verbatimSymlinks: true });
    const node = `${base}/bin/node`;
    const main = `${base}/lib/gpugate/dist/cli/main.js`;
    for (const program of ['/usr/bin/vllm', node, main]) {
      mkdirSync(join(made.root, dirname(program)), { recursive: true });
      writeFileSync(join(made.root, program), '#!/bin/sh\nexit 0\n');
      chmodSync(join(made.root, program), 0o755);
    }
    return { ...made, node, main };
  }

  function verify(root: string): string {
    const result = spawnSync('systemd-analyze', ['verify', `--root=${root}`, 'llm.service'], { encoding: 'utf8', timeout: 60_000 });
    return `${result.stdout}${result.stderr}`.trim() + (result.status === 0 ? '' : `\n(exit ${String(result.status)})`);
  }

  /** Write the drop-in for `program`, verify the unit, and return the ExecStartPre= words systemd loaded (as it will pass them). */
  function loadedGate(made: { root: string; dir: string }, program: string[]): { verified: string; argv: string[] } {
    const text = buildDropIn(emptyUnit(), { argv: program }).text;
    mkdirSync(join(made.dir, 'llm.service.d'));
    writeFileSync(join(made.dir, 'llm.service.d', 'gpugate.conf'), text);
    const verified = verify(made.root);
    // The dump shell-escapes $ and `; systemd keeps "$$" in arguments until it runs them, then passes "$"; a program path is never expanded.
    const loaded = (systemdDump(made.root, 'llm.service').exec.get('ExecStartPre')?.[0] ?? []).map((word) => word.replace(/\\([$`])/g, '$1'));
    return { verified, argv: [loaded[0] ?? '', ...loaded.slice(1).map((word) => word.replace(/\$\$/g, '$'))] };
  }

  const GATE_WORDS = ['wait', '--for', 'vllm', '--min-free', '0.9', '--margin', '2GiB', '--stable', '5s', '--timeout', '240s', '--notify'];
  const SPECIAL = [
    ['a double quote', '/opt/gp"q'], ['a backslash', '/opt/gp\\b'], ['a single quote', "/opt/gp'q"], ['a dollar', '/opt/gp$HOME'],
    ['a dollar in braces', '/opt/gp${X}'], ['a percent', '/opt/gp%n'], ['a space', '/opt/gp dir'], ['all of them', '/opt/a "b\\c\'d$e%f g'],
  ] as const;

  it.each(SPECIAL)('gpugate\'s main.js under a path with %s: verify passes and systemd passes node the very words gpugate meant', (_what, base) => {
    const made = verifiableRoot(base);
    const node = '/usr/bin/node';
    mkdirSync(join(made.root, 'usr', 'bin'), { recursive: true });
    writeFileSync(join(made.root, node), '#!/bin/sh\nexit 0\n');
    chmodSync(join(made.root, node), 0o755);
    const { verified, argv } = loadedGate(made, [node, '--disable-sigusr1', made.main]);
    expect(verified).toBe('');
    expect(argv).toEqual([node, '--disable-sigusr1', made.main, ...GATE_WORDS]);
  });

  it.each(SPECIAL)('node under a path with %s: exactly the line systemd runs, or refused (78) when systemd would refuse the program', async (_what, base) => {
    const made = verifiableRoot(base);
    if (/["'\\]/.test(base)) {
      expect(() => buildDropIn(emptyUnit(), { argv: [made.node, '--disable-sigusr1', made.main] })).toThrow(expect.objectContaining({
        name: 'ConfigError', message: expect.stringContaining('systemd refuses a program path holding a quote or a backslash'),
      }));
      // systemd's own loader refuses such a program however it is quoted: the unit would start with no gate.
      mkdirSync(join(made.dir, 'llm.service.d'));
      writeFileSync(join(made.dir, 'llm.service.d', 'by-hand.conf'), `[Service]\nExecStartPre="${made.node.replace(/[\\"]/g, (c) => `\\${c}`)}" ${made.main.replace(/[\\"' ]/g, '_')}\n`);
      expect(verify(made.root)).toContain('Executable name contains special characters');
      return;
    }
    const { verified, argv } = loadedGate(made, [made.node, '--disable-sigusr1', made.main]);
    expect(verified).toBe('');
    expect(argv).toEqual([made.node, '--disable-sigusr1', made.main, ...GATE_WORDS]);
  });

  it('gpugate systemd run as a program under such a path exits 78 naming it, writing nothing', async () => {
    const base = makeTestTempDir('gpugate-quote-"dir-');
    const node = join(base, 'node');
    const made = makeRoot({ 'llm.service': unitText('0.85') });
    // A hard link: the same node binary, run from a path holding a double quote (process.execPath is then that path).
    linkSync(process.execPath, node);
    const run = spawnSync(node, [cliPath(), 'systemd', '--unit', 'llm', '--unit-path', made.dir, '--write', '--root', made.root], { encoding: 'utf8', env: cliEnv(null), timeout: 60_000 });
    expect(run.status, run.stderr).toBe(78);
    expect(logText(run.stderr)).toContain(`${JSON.stringify(node)}: systemd refuses a program path holding a quote or a backslash`);
    expect(existsSync(join(made.dir, 'llm.service.d'))).toBe(false);
  });

  it('would notice a path the line gets wrong (the check can fail): a missing program is reported', () => {
    const { root, dir, main } = verifiableRoot('/opt/gp$HOME');
    const text = buildDropIn(emptyUnit(), { argv: ['/opt/gp$$HOME/bin/node', main] }).text;
    mkdirSync(join(dir, 'llm.service.d'));
    writeFileSync(join(dir, 'llm.service.d', 'gpugate.conf'), text);
    expect(verify(root)).toContain('is not executable');
  });

  it('refuses a path with a newline, which no unit line can carry: a config error naming it', () => {
    expect(() => buildDropIn(emptyUnit(), { argv: ['/opt/a\nb/node', '/x/main.js'] })).toThrow(expect.objectContaining({ name: 'ConfigError', message: expect.stringContaining('"/opt/a\\nb/node" holds a control character') }));
  });
});

/** A unit with systemd's defaults and an ExecStart= without --gpu-memory-utilization. */
function emptyUnit(): Parameters<typeof buildDropIn>[0] {
  return {
    name: 'llm.service', source: 'unit-files', fragmentPath: null, dropInPaths: [], type: 'simple', restart: 'on-failure', restartUsec: 10e6,
    startLimitIntervalUsec: 10e6, startLimitBurst: 5, timeoutStartUsec: 90e6, notifyAccess: 'none', killMode: 'control-group',
    execStartPre: [], execStart: [{ path: '/usr/bin/vllm', argv: ['/usr/bin/vllm', 'serve', 'm'], ignoreErrors: false }], notes: [],
  };
}
