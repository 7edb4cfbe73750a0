/**
 * Unit files that try to stall or swamp the unit-file reader: a FIFO as the unit file or as a
 * drop-in (opening one blocks), a link to a FIFO, a directory or a device node named like a unit
 * or a drop-in, a file above the size cap, and tens of thousands of lines. Each is planted for
 * real and read by the real CLI (`gpugate systemd`, `gpugate doctor --unit`) as a subprocess,
 * which must answer with a clear message; a hang is caught by the kill guard, not by timing.
 * What systemd itself makes of each layout is asked of its own loader (`systemd-analyze verify`).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readUnitProperties } from '../../src/host/systemd-unit';
import { UNIT_FILE_MAX_BYTES } from '../../src/host/unit-file-read';
import { cliEnv, parseJsonOutput, runCli, type CliRun } from '../helpers/cli';
import { bundledScenario, simLibraryFor } from '../helpers/sim';
import { haveSystemdAnalyze, systemdDump } from '../helpers/systemd-dump';
import { makeTestTempDir } from '../helpers/temp-root';

const SEED = '[Service]\nExecStart=/usr/bin/vllm serve m --gpu-memory-utilization 0.85\nRestart=on-failure\nRestartSec=10\n';
const scenario = bundledScenario('idle-8x-rtx-pro-6000');
const env = cliEnv(scenario, { GPUGATE_NVML_LIBRARY: simLibraryFor(scenario) });
/** Only a guard against a hang: a run that blocks is killed and then has signal SIGKILL. */
const HANG_GUARD_MS = 60_000;

function unitDir(files: Record<string, string> = {}): { root: string; dir: string } {
  const root = makeTestTempDir('gpugate-hostile-unit-');
  const dir = join(root, 'etc', 'systemd', 'system');
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return { root, dir };
}

function mkfifo(path: string): void {
  const made = spawnSync('mkfifo', [path], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`mkfifo ${path}: ${made.stderr}`);
}

function systemd(dir: string, unit = 'llm'): Promise<CliRun> {
  return runCli(['systemd', '--unit', unit, '--unit-path', dir], { env, killAfterMs: HANG_GUARD_MS });
}

interface Check { id: string; status: string; summary: string; evidence: Record<string, unknown> }

async function doctorUnitChecks(dir: string, unit = 'llm'): Promise<Check[]> {
  const log = join(dir, '..', 'empty.log');
  writeFileSync(log, '');
  const run = await runCli(['doctor', '--json', '--kernel-log', log, '--unit', unit, '--unit-path', dir], { env, killAfterMs: HANG_GUARD_MS });
  expect(run.signal, 'doctor --unit was killed by the hang guard').toBeNull();
  const document = parseJsonOutput(run) as unknown as { checks: (Check & { subject: string })[] };
  return document.checks.filter((c) => c.subject.startsWith('unit '));
}

describe('a FIFO where a unit file or drop-in belongs', () => {
  it('as the unit file: gpugate systemd exits 78 naming it, and doctor --unit fails unit.readable, neither blocking', async () => {
    const { dir } = unitDir();
    mkfifo(join(dir, 'llm.service'));
    const run = await systemd(dir);
    expect(run.signal).toBeNull();
    expect(run.code).toBe(78);
    expect(run.stderr).toContain(`${join(dir, 'llm.service')} is a FIFO, not a regular file`);
    const checks = await doctorUnitChecks(dir);
    expect(checks).toEqual([expect.objectContaining({ id: 'unit.readable', status: 'fail', summary: expect.stringContaining('is a FIFO') })]);
  });

  it('as a drop-in (on which systemd itself would block): refused with 78 naming it; doctor --unit fails unit.readable', async () => {
    const { dir } = unitDir({ 'llm.service': SEED, 'llm.service.d/real.conf': '[Service]\nRestartSec=20\n' });
    mkfifo(join(dir, 'llm.service.d', 'evil.conf'));
    await expect(readUnitProperties('llm.service', { kind: 'unit-files', directory: dir })).rejects.toMatchObject({ name: 'ConfigError' });
    const run = await systemd(dir);
    expect(run.signal).toBeNull();
    expect(run.code).toBe(78);
    expect(run.stderr).toContain(`${join(dir, 'llm.service.d', 'evil.conf')} is a FIFO, not a regular file: systemd would block reading it`);
    const checks = await doctorUnitChecks(dir);
    expect(checks).toEqual([expect.objectContaining({ id: 'unit.readable', status: 'fail', summary: expect.stringContaining('evil.conf is a FIFO') })]);
  });

  it('behind a link among the drop-ins: refused with 78 naming it, not opened', async () => {
    const { dir } = unitDir({ 'llm.service': SEED });
    const elsewhere = makeTestTempDir('gpugate-hostile-fifo-');
    mkfifo(join(elsewhere, 'pipe'));
    mkdirSync(join(dir, 'llm.service.d'));
    symlinkSync(join(elsewhere, 'pipe'), join(dir, 'llm.service.d', 'linked.conf'));
    const run = await systemd(dir);
    expect(run.signal).toBeNull();
    expect(run.code).toBe(78);
    expect(run.stderr).toContain(`${join(dir, 'llm.service.d', 'linked.conf')} is a FIFO, not a regular file`);
    const checks = await doctorUnitChecks(dir);
    expect(checks).toEqual([expect.objectContaining({ id: 'unit.readable', status: 'fail', summary: expect.stringContaining('linked.conf is a FIFO') })]);
  });
});

describe('directories and devices', () => {
  it('a directory named x.conf among the drop-ins is listed as systemd lists it, holds nothing, and is noted (never exit 70)', async () => {
    const { root, dir } = unitDir({ 'llm.service': SEED, 'llm.service.d/zz.conf': '[Service]\nRestartSec=30\n' });
    mkdirSync(join(dir, 'llm.service.d', 'x.conf'));
    const unit = await readUnitProperties('llm.service', { kind: 'unit-files', directory: dir });
    expect(unit.dropInPaths).toEqual([join(dir, 'llm.service.d', 'x.conf'), join(dir, 'llm.service.d', 'zz.conf')]);
    expect(unit.restartUsec).toBe(30e6);
    expect(unit.notes).toEqual([`${join(dir, 'llm.service.d', 'x.conf')}: a directory, not a drop-in file; systemd lists it but reads no settings from it`]);
    if (haveSystemdAnalyze()) {
      const dump = systemdDump(root, 'llm.service');
      expect(dump.dropInPaths).toEqual(unit.dropInPaths);
      expect(dump.fields.get('RestartSec')).toBe('30s');
    }
    const run = await systemd(dir);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain('x.conf: a directory, not a drop-in file');
    const checks = await doctorUnitChecks(dir);
    expect(checks.find((c) => c.id === 'unit.ignored-lines')).toMatchObject({ status: 'warn', evidence: { lines: [expect.stringContaining('x.conf: a directory')] } });
  });

  it('a unit file linked to /dev/zero is masked, as systemd itself reports it, and the message names the device', async () => {
    const { root, dir } = unitDir();
    symlinkSync('/dev/zero', join(dir, 'llm.service'));
    await expect(readUnitProperties('llm.service', { kind: 'unit-files', directory: dir })).rejects.toMatchObject({
      name: 'ConfigError', message: expect.stringContaining(`unit llm.service is masked (${join(dir, 'llm.service')} → /dev/zero, a character device`),
    });
    if (haveSystemdAnalyze()) {
      const verify = spawnSync('systemd-analyze', ['verify', `--root=${root}`, 'llm.service'], { encoding: 'utf8', timeout: 60_000 });
      expect(`${verify.stdout}${verify.stderr}`).toContain('Unit llm.service is masked.');
    }
  });

  it('a character device node itself (no link) named like the unit is no unit file: "no unit file", not "masked"', async () => {
    const { dir } = unitDir();
    const made = spawnSync('mknod', [join(dir, 'llm.service'), 'c', '1', '5'], { encoding: 'utf8' });
    expect(made.status, made.stderr).toBe(0);
    const run = await systemd(dir);
    expect(run.code).toBe(78);
    expect(run.stderr).toContain(`no unit file llm.service in ${dir}: ${join(dir, 'llm.service')} is a character device, not a regular file`);
    expect(run.stderr).not.toContain('masked');
  });

  it('a drop-in linked to /dev/zero reads as empty, as one linked to /dev/null does', async () => {
    const { dir } = unitDir({ 'llm.service': SEED, 'service.d/a.conf': '[Service]\nRestartSec=40\n' });
    mkdirSync(join(dir, 'llm.service.d'));
    symlinkSync('/dev/zero', join(dir, 'llm.service.d', 'a.conf'));
    const unit = await readUnitProperties('llm.service', { kind: 'unit-files', directory: dir });
    expect(unit.dropInPaths).toEqual([join(dir, 'llm.service.d', 'a.conf')]);
    expect(unit.restartUsec).toBe(10e6);
  });
});

describe('size and length', () => {
  it(`refuses a unit file above ${UNIT_FILE_MAX_BYTES} bytes with 78 naming the cap, reading no more than it`, async () => {
    const { dir } = unitDir({ 'llm.service': SEED });
    truncateSync(join(dir, 'llm.service'), UNIT_FILE_MAX_BYTES + 1);
    const run = await systemd(dir);
    expect(run.code).toBe(78);
    expect(run.stderr).toContain(`holds ${UNIT_FILE_MAX_BYTES + 1} bytes, more than the ${UNIT_FILE_MAX_BYTES} bytes (4 MiB)`);
  });

  it('parses 30 000 ExecStartPre= lines, every one in order', async () => {
    const lines = Array.from({ length: 30_000 }, (_, i) => `ExecStartPre=/bin/echo ${i}`);
    const { dir } = unitDir({ 'llm.service': `${SEED}${lines.join('\n')}\n` });
    const unit = await readUnitProperties('llm.service', { kind: 'unit-files', directory: dir });
    expect(unit.execStartPre).toHaveLength(30_000);
    expect(unit.execStartPre[29_999]?.argv).toEqual(['/bin/echo', '29999']);
    const run = await systemd(dir);
    expect(run.signal).toBeNull();
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^ExecStartPre=.* wait --for vllm --min-free 0\.85 /m);
  }, HANG_GUARD_MS * 2);

  it('parses 200 000 continuation lines into one command with every word', async () => {
    const words = Array.from({ length: 200_000 }, (_, i) => `w${i} \\`);
    const { dir } = unitDir({ 'llm.service': `${SEED}ExecStartPre=/bin/echo \\\n${words.join('\n')}\n  last\n` });
    const unit = await readUnitProperties('llm.service', { kind: 'unit-files', directory: dir });
    expect(unit.execStartPre).toHaveLength(1);
    const argv = unit.execStartPre[0]?.argv ?? [];
    expect(argv).toHaveLength(200_002);
    expect(argv.slice(0, 3)).toEqual(['/bin/echo', 'w0', 'w1']);
    expect(argv.slice(-2)).toEqual(['w199999', 'last']);
    const checks = await doctorUnitChecks(dir);
    expect(checks.find((c) => c.id === 'unit.gate')).toMatchObject({ status: 'fail' });
  }, HANG_GUARD_MS * 2);
});
