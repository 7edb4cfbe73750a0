/**
 * `gpugate systemd --unit NAME` as a subprocess, on unit files in a temporary unit directory:
 * the drop-in it prints is the shipped contrib file fitted to the unit, passes `systemd-analyze
 * verify` with no warning applied to the unit, makes the unit pass every doctor unit check, and
 * `--write` puts it in place atomically, replaces only a file gpugate wrote, and leaves links,
 * foreign files and linked directories alone (exit 77).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildDropIn } from '../../src/cli/systemd-drop-in';
import { checkUnit } from '../../src/cli/unit-checks';
import { readUnitProperties } from '../../src/host/systemd-unit';
import { cliEnv, cliPath, runCli, type CliRun } from '../helpers/cli';
import { repoRoot } from '../helpers/sim';
import { haveSystemdAnalyze } from '../helpers/systemd-dump';
import { makeTestTempDir } from '../helpers/temp-root';
import { logText } from '../helpers/log-lines';

const SEED = '[Unit]\nDescription=An LLM server\n\n[Service]\nExecStart=/usr/bin/vllm serve some-model --gpu-memory-utilization 0.85\nRestart=on-failure\nRestartSec=10\n';

/** A root with etc/systemd/system holding llm.service (or `units`). */
function makeRoot(units: Record<string, string> = { 'llm.service': SEED }): { root: string; dir: string } {
  const root = makeTestTempDir('gpugate-systemd-cmd-');
  const dir = join(root, 'etc', 'systemd', 'system');
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(units)) writeFileSync(join(dir, name), text);
  return { root, dir };
}

function systemd(args: string[], env: NodeJS.ProcessEnv = cliEnv(null)): Promise<CliRun> {
  return runCli(['systemd', ...args], { env });
}

/** The setting lines of a unit file (no comments, no blank lines). */
function directives(text: string): string[] {
  return text.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('#'));
}

const GATE_MAIN = join(repoRoot(), 'dist', 'cli', 'main.js');

describe('the printed drop-in', () => {
  it('is the shipped contrib/systemd/gpugate-wait.conf for the reference unit (one source of truth)', async () => {
    const { dir } = makeRoot({ 'llm.service': SEED.replace(' --gpu-memory-utilization 0.85', '') });
    const unit = await readUnitProperties('llm.service', { kind: 'unit-files', directory: dir });
    const generated = buildDropIn(unit, { argv: ['/usr/local/bin/gpugate'] }).text;
    const shipped = readFileSync(join(repoRoot(), 'contrib', 'systemd', 'gpugate-wait.conf'), 'utf8');
    expect(directives(generated)).toEqual(directives(shipped));
  });

  it('takes --min-free from the unit\'s --gpu-memory-utilization and names node and gpugate by absolute path', async () => {
    const { dir } = makeRoot();
    const run = await systemd(['--unit', 'llm', '--unit-path', dir]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(`ExecStartPre=${process.execPath} --disable-sigusr1 ${GATE_MAIN} wait --for vllm --min-free 0.85 --margin 2GiB --stable 5s --timeout 240s --notify\n`);
    expect(run.stdout.split('\n')[0]).toBe('# Written by gpugate systemd --unit llm.service; it replaces this file only while this line comes first.');
    expect(logText(run.stderr)).toContain('--write puts it in /etc/systemd/system/llm.service.d/gpugate.conf');
    expect(logText(run.stderr)).toContain('--for vllm --min-free 0.85 from its --gpu-memory-utilization');
    expect(directives(run.stdout)).toEqual(expect.arrayContaining(['StartLimitIntervalSec=30min', 'StartLimitBurst=6', 'NotifyAccess=exec', 'TimeoutStartSec=300']));
  });

  it('fits the start limits to RestartSec= and keeps a longer TimeoutStartSec= of the unit', async () => {
    const { dir } = makeRoot({ 'llm.service': `${SEED.replace('RestartSec=10', 'RestartSec=1min')}TimeoutStartSec=15min\n` });
    const run = await systemd(['--unit', 'llm.service', '--unit-path', dir]);
    expect(run.code, run.stderr).toBe(0);
    // 6 × (60 s + 240 s) = 30 min, a fifth on top: 36 min.
    expect(run.stdout).toContain('# take 6 x (1min + 240s) = 30min');
    expect(directives(run.stdout)).toContain('StartLimitIntervalSec=36min');
    expect(directives(run.stdout)).toContain('TimeoutStartSec=900');
  });

  it('prints, after a --write, the same text again (its own gate is not counted as foreign)', async () => {
    const { root, dir } = makeRoot();
    const first = await systemd(['--unit', 'llm', '--unit-path', dir]);
    expect((await systemd(['--unit', 'llm', '--unit-path', dir, '--write', '--root', root])).code).toBe(0);
    const again = await systemd(['--unit', 'llm', '--unit-path', dir]);
    expect(again.stdout).toBe(first.stdout);
  });

  it('adds no second gate to a unit that already runs gpugate wait (the shipped template)', async () => {
    const { dir } = makeRoot({ 'vllm@.service': readFileSync(join(repoRoot(), 'contrib', 'systemd', 'vllm@.service'), 'utf8') });
    const run = await systemd(['--unit', 'vllm@llama', '--unit-path', dir]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).not.toMatch(/^ExecStartPre=/m);
    expect(logText(run.stderr)).toContain('no second ExecStartPre=');
  });

  it('keeps no start timeout on a unit that has none', async () => {
    const { dir } = makeRoot({ 'llm.service': `${SEED}TimeoutStartSec=infinity\n` });
    const run = await systemd(['--unit', 'llm', '--unit-path', dir]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).not.toMatch(/^TimeoutStartSec=/m);
  });

  it('reads GPUGATE_SYSTEMD_UNIT_PATH when --unit-path is not given', async () => {
    const { dir } = makeRoot();
    const run = await systemd(['--unit', 'llm'], cliEnv(null, { GPUGATE_SYSTEMD_UNIT_PATH: dir }));
    expect(run.code, run.stderr).toBe(0);
    expect(logText(run.stderr)).toContain(`from the unit files in ${dir}`);
  });

  it('makes the seed unit pass every doctor unit check once installed', async () => {
    const { root, dir } = makeRoot();
    const run = await systemd(['--unit', 'llm', '--unit-path', dir, '--write', '--root', root]);
    expect(run.code, run.stderr).toBe(0);
    const before = checkUnit(await readUnitProperties('llm.service', { kind: 'unit-files', directory: join(makeRoot().dir) }));
    expect(before.some((c) => c.status === 'fail')).toBe(true);
    const after = checkUnit(await readUnitProperties('llm.service', { kind: 'unit-files', directory: dir }));
    expect(after.filter((c) => c.status !== 'pass')).toEqual([]);
  });
});

describe('errors', () => {
  it.each([
    [[], 64, 'missing --unit NAME'],
    [['--unit', '../etc/passwd'], 64, 'invalid value "../etc/passwd"'],
    [['--unit', '--all'], 64, "option '--unit' needs a value"],
    [['--unit', 'llm', '--root', '/tmp'], 64, '--root only applies to --write'],
  ] as const)('%j exits %d', async (args, code, message) => {
    const run = await systemd([...args]);
    expect(run.code).toBe(code);
    expect(logText(run.stderr)).toContain(message);
  });

  it('a unit that is not there exits 78 naming it', async () => {
    const { dir } = makeRoot();
    const run = await systemd(['--unit', 'nope', '--unit-path', dir]);
    expect(run.code).toBe(78);
    expect(logText(run.stderr)).toContain(`no unit file nope.service in ${dir}`);
  });

  it('without --unit-path it asks systemctl: unavailable (69) without systemd as PID 1, not loaded (78) with it', async () => {
    const run = await systemd(['--unit', 'gpugate-test-no-such-unit']);
    expect([69, 78]).toContain(run.code);
    expect(logText(run.stderr)).toMatch(run.code === 69 ? /cannot read unit gpugate-test-no-such-unit\.service with systemctl show: .*give --unit-path DIR/ : /is not loaded \(LoadState=not-found/);
  });
});

describe('--write', () => {
  const target = (root: string): string => join(root, 'etc', 'systemd', 'system', 'llm.service.d', 'gpugate.conf');

  it('creates the file (0644) with the printed text, says to daemon-reload, then finds it up to date', async () => {
    const { root, dir } = makeRoot();
    const printed = await systemd(['--unit', 'llm', '--unit-path', dir]);
    const run = await systemd(['--unit', 'llm', '--unit-path', dir, '--write', '--root', root]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe(`${target(root)} written\nNow run: systemctl daemon-reload   (the drop-in applies from the next start of the unit)\n`);
    expect(readFileSync(target(root), 'utf8')).toBe(printed.stdout);
    expect(statSync(target(root)).mode & 0o777).toBe(0o644);
    const again = await systemd(['--unit', 'llm', '--unit-path', dir, '--write', '--root', root]);
    expect(again.stdout).toBe(`${target(root)} is already up to date\n`);
  });

  it('replaces its own file by rename (a new inode) when the unit changed, leaving no temporary file', async () => {
    const { root, dir } = makeRoot();
    expect((await systemd(['--unit', 'llm', '--unit-path', dir, '--write', '--root', root])).code).toBe(0);
    const first = statSync(target(root)).ino;
    writeFileSync(join(dir, 'llm.service'), SEED.replace('0.85', '0.7'));
    const run = await systemd(['--unit', 'llm', '--unit-path', dir, '--write', '--root', root]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('replaced');
    expect(readFileSync(target(root), 'utf8')).toContain('--min-free 0.7 ');
    expect(statSync(target(root)).ino).not.toBe(first);
    expect(readdirSync(dirname(target(root)))).toEqual(['gpugate.conf']);
  });

  it('never replaces a file it did not write: exit 77, the file untouched', async () => {
    const { root, dir } = makeRoot();
    mkdirSync(dirname(target(root)));
    writeFileSync(target(root), '[Service]\nExecStartPre=/usr/local/bin/my-own-check\n');
    const before = statSync(target(root));
    const run = await systemd(['--unit', 'llm', '--unit-path', dir, '--write', '--root', root]);
    expect(run.code).toBe(77);
    expect(logText(run.stderr)).toContain('was not written by gpugate');
    expect(readFileSync(target(root), 'utf8')).toBe('[Service]\nExecStartPre=/usr/local/bin/my-own-check\n');
    expect(statSync(target(root)).ino).toBe(before.ino);
    expect(readdirSync(dirname(target(root)))).toEqual(['gpugate.conf']);
  });

  it('leaves a symbolic link at the target, and a linked NAME.d directory, alone', async () => {
    const { root, dir } = makeRoot();
    const elsewhere = makeTestTempDir('gpugate-systemd-elsewhere-');
    writeFileSync(join(elsewhere, 'victim'), '# Written by gpugate systemd (a decoy)\n');
    mkdirSync(dirname(target(root)));
    symlinkSync(join(elsewhere, 'victim'), target(root));
    const linked = await systemd(['--unit', 'llm', '--unit-path', dir, '--write', '--root', root]);
    expect(linked.code).toBe(77);
    expect(logText(linked.stderr)).toContain('is a symbolic link');
    expect(readlinkSync(target(root))).toBe(join(elsewhere, 'victim'));
    expect(readFileSync(join(elsewhere, 'victim'), 'utf8')).toBe('# Written by gpugate systemd (a decoy)\n');

    const other = makeRoot();
    symlinkSync(elsewhere, join(other.dir, 'llm.service.d'));
    const dirLinked = await systemd(['--unit', 'llm', '--unit-path', other.dir, '--write', '--root', other.root]);
    expect(dirLinked.code).toBe(77);
    expect(logText(dirLinked.stderr)).toContain('is not a plain directory');
    expect(readdirSync(elsewhere)).toEqual(['victim']);
  });

  it('refuses a root without etc/systemd/system (an OS error naming it), creating nothing', async () => {
    const { dir } = makeRoot();
    const empty = makeTestTempDir('gpugate-systemd-empty-root-');
    const run = await systemd(['--unit', 'llm', '--unit-path', dir, '--write', '--root', empty]);
    expect(run.code).toBe(71);
    expect(logText(run.stderr)).toContain(`${join(empty, 'etc', 'systemd', 'system')} does not exist`);
    expect(readdirSync(empty)).toEqual([]);
  });
});

const analyze = haveSystemdAnalyze();
const inCi = process.env.CI === 'true';

describe.skipIf(!analyze && !inCi)('systemd-analyze verify', () => {
  /** A root with the system's own units and stand-ins for the programs the unit and the drop-in start (verify insists they exist). */
  function verifiableRoot(units: Record<string, string>): { root: string; dir: string } {
    const made = makeRoot(units);
    const systemUnits = ['/usr/lib/systemd/system', '/lib/systemd/system'].find((d) => existsSync(join(d, 'sysinit.target')));
    if (systemUnits === undefined) throw new Error('no system unit directory with sysinit.target found');
    mkdirSync(join(made.root, 'usr', 'lib', 'systemd'), { recursive: true });
    cpSync(systemUnits, join(made.root, 'usr', 'lib', 'systemd', 'system'), { recursive: true, verbatimSymlinks: true });
    for (const program of ['/usr/bin/vllm', process.execPath]) {
      mkdirSync(join(made.root, dirname(program)), { recursive: true });
      writeFileSync(join(made.root, program), '#!/bin/sh\nexit 0\n');
      chmodSync(join(made.root, program), 0o755);
    }
    return made;
  }

  function verify(root: string, unit: string): string {
    const result = spawnSync('systemd-analyze', ['verify', `--root=${root}`, unit], { encoding: 'utf8', timeout: 60_000 });
    return `${result.stdout}${result.stderr}`.trim() + (result.status === 0 ? '' : `\n(exit ${String(result.status)})`);
  }

  it('passes with no warning on the seed unit with the written drop-in', async () => {
    const { root, dir } = verifiableRoot({ 'llm.service': SEED });
    expect(verify(root, 'llm.service')).toBe('');
    const run = await systemd(['--unit', 'llm', '--unit-path', dir, '--write', '--root', root]);
    expect(run.code, run.stderr).toBe(0);
    expect(verify(root, 'llm.service')).toBe('');
  });

  it('passes on the shipped template instance with its drop-in, and would report a bad line (the check can fail)', async () => {
    const template = readFileSync(join(repoRoot(), 'contrib', 'systemd', 'vllm@.service'), 'utf8').replace('ExecStart=vllm', 'ExecStart=/usr/bin/vllm').replace('/usr/local/bin/gpugate wait', `${process.execPath} ${cliPath()} wait`);
    const { root, dir } = verifiableRoot({ 'vllm@.service': template });
    mkdirSync(join(root, 'etc', 'vllm'), { recursive: true });
    const run = await systemd(['--unit', 'vllm@llama', '--unit-path', dir, '--write', '--root', root]);
    expect(run.code, run.stderr).toBe(0);
    expect(lstatSync(join(dir, 'vllm@llama.service.d', 'gpugate.conf')).isFile()).toBe(true);
    expect(verify(root, 'vllm@llama.service')).toBe('');
    writeFileSync(join(dir, 'vllm@llama.service.d', 'zz-broken.conf'), '[Service]\nRestartSteps=5\n');
    expect(verify(root, 'vllm@llama.service')).toContain("Unknown key 'RestartSteps'");
  });
});
