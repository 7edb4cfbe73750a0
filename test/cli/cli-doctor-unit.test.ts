/**
 * `gpugate doctor --unit NAME` as a subprocess on the simulated host, the unit in a temporary unit
 * directory: the unit's checks join the report (subject "unit NAME"), a failing unit makes the
 * whole report fail (exit 69), a passing one leaves the exit code what the host alone gives, a
 * unit that cannot be read is a failed check, and a bad name is a usage error.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliEnv, parseJsonOutput, runCli } from '../helpers/cli';
import { bundledScenario, repoRoot, simLibraryFor } from '../helpers/sim';
import { makeTestTempDir } from '../helpers/temp-root';
import { logText } from '../helpers/log-lines';

interface Check { id: string; subject: string; status: string; summary: string; evidence: Record<string, unknown> }
interface Document { result: string; exitCode: number; checks: Check[] }

const work = makeTestTempDir('gpugate-doctor-unit-');
const emptyLog = join(work, 'empty.log');
writeFileSync(emptyLog, '');
const scenario = bundledScenario('idle-8x-rtx-pro-6000');
const env = cliEnv(scenario, { GPUGATE_NVML_LIBRARY: simLibraryFor(scenario) });
const SEED = '[Service]\nExecStart=/usr/bin/vllm serve m --gpu-memory-utilization 0.85\nRestart=on-failure\nRestartSec=10\n';

async function doctor(args: string[]): Promise<Document> {
  const run = await runCli(['doctor', '--json', '--kernel-log', emptyLog, ...args], { env, killAfterMs: 60_000 });
  const document = parseJsonOutput(run) as unknown as Document;
  expect(run.code, run.stderr).toBe(document.exitCode);
  return document;
}

const unitChecks = (document: Document): Check[] => document.checks.filter((c) => c.subject.startsWith('unit '));

describe('gpugate doctor --unit', () => {
  it('fails the report for the seed unit, with the start-limit arithmetic', async () => {
    const dir = join(work, 'seed');
    mkdirSync(dir);
    writeFileSync(join(dir, 'llm.service'), SEED);
    const document = await doctor(['--unit', 'llm', '--unit-path', dir]);
    expect(document).toMatchObject({ result: 'fail', exitCode: 69 });
    const checks = unitChecks(document);
    expect(checks.map((c) => c.id)).toEqual(['unit.gate', 'unit.restart-limits', 'unit.start-timeout', 'unit.notify-access', 'unit.kill-mode', 'unit.memory-fraction', 'unit.gate-passable']);
    expect(checks.find((c) => c.id === 'unit.restart-limits')).toMatchObject({ status: 'fail', subject: 'unit llm.service', evidence: { fastestLoop: '5 × 10s = 50s' } });
  });

  it('adds only passing checks once gpugate systemd --write has installed the drop-in: the exit code is the host\'s own', async () => {
    const root = join(work, 'root');
    const dir = join(root, 'etc', 'systemd', 'system');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'llm.service'), SEED);
    const write = await runCli(['systemd', '--unit', 'llm', '--unit-path', dir, '--write', '--root', root], { env });
    expect(write.code, write.stderr).toBe(0);
    const withUnit = await doctor(['--unit', 'llm.service', '--unit-path', dir]);
    expect(unitChecks(withUnit).filter((c) => c.status !== 'pass')).toEqual([]);
    expect(unitChecks(withUnit)).toHaveLength(7);
    const hostOnly = await doctor([]);
    expect(unitChecks(hostOnly)).toEqual([]);
    expect(withUnit.exitCode).toBe(hostOnly.exitCode);
  });

  it('reads GPUGATE_SYSTEMD_UNIT_PATH, and judges the shipped template instance passing', async () => {
    const dir = join(work, 'template');
    mkdirSync(dir);
    writeFileSync(join(dir, 'vllm@.service'), readFileSync(join(repoRoot(), 'contrib', 'systemd', 'vllm@.service')));
    const run = await runCli(['doctor', '--json', '--kernel-log', emptyLog, '--unit', 'vllm@llama'], { env: { ...env, GPUGATE_SYSTEMD_UNIT_PATH: dir }, killAfterMs: 60_000 });
    const document = parseJsonOutput(run) as unknown as Document;
    expect(unitChecks(document).map((c) => `${c.id}:${c.status}`)).toEqual(['unit.gate:pass', 'unit.restart-limits:pass', 'unit.start-timeout:pass', 'unit.notify-access:pass', 'unit.kill-mode:pass', 'unit.memory-fraction:pass', 'unit.gate-passable:pass']);
  });

  it('reports a unit it cannot read as a failed check (exit 69), and refuses a bad name (64) or --unit-path alone (64)', async () => {
    const document = await doctor(['--unit', 'nope', '--unit-path', work]);
    expect(unitChecks(document)).toEqual([expect.objectContaining({ id: 'unit.readable', status: 'fail', summary: expect.stringContaining('no unit file nope.service') })]);
    expect(document.exitCode).toBe(69);
    const bad = await runCli(['doctor', '--unit', 'a/b'], { env });
    expect(bad.code).toBe(64);
    expect(logText(bad.stderr)).toContain('invalid value "a/b"');
    const alone = await runCli(['doctor', '--unit-path', work], { env });
    expect(alone.code).toBe(64);
    expect(logText(alone.stderr)).toContain('--unit-path applies to --unit NAME');
  });
});
