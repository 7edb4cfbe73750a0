/**
 * The shipped systemd files pass `systemd-analyze verify` with no warning at all: the unit
 * template as an instance, and the drop-in applied to a minimal service. They are checked in a
 * throw-away root holding the system's own units and stand-in `gpugate` / `vllm` executables
 * (verify insists that every command exists). Also pins the lines the contract requires.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/sim';

const contrib = join(repoRoot(), 'contrib', 'systemd');
const unitTemplate = readFileSync(join(contrib, 'vllm@.service'), 'utf8');
const dropIn = readFileSync(join(contrib, 'gpugate-wait.conf'), 'utf8');

const analyze = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
const haveAnalyze = analyze.error === undefined && analyze.status === 0;
const inCi = process.env.CI === 'true';
if (!haveAnalyze && !inCi) {
  console.warn('cli-systemd-units: skipping systemd-analyze verify: systemd-analyze is not installed (apt-get install -y systemd)');
}

const root = mkdtempSync(join(tmpdir(), 'gpugate-systemd-root-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let prepared = false;

function prepareRoot(): void {
  if (prepared) return;
  prepared = true;
  const systemUnits = ['/usr/lib/systemd/system', '/lib/systemd/system'].find((dir) => existsSync(join(dir, 'sysinit.target')));
  if (systemUnits === undefined) throw new Error('no system unit directory with sysinit.target found');
  mkdirSync(join(root, 'usr', 'lib', 'systemd'), { recursive: true });
  cpSync(systemUnits, join(root, 'usr', 'lib', 'systemd', 'system'), { recursive: true, dereference: false, verbatimSymlinks: true });
  // vllm where the template finds it by name; gpugate where the shipped files name it.
  for (const program of [['usr', 'bin', 'vllm'], ['usr', 'local', 'bin', 'gpugate']]) {
    mkdirSync(join(root, ...program.slice(0, -1)), { recursive: true });
    writeFileSync(join(root, ...program), '#!/bin/sh\nexit 0\n');
    chmodSync(join(root, ...program), 0o755);
  }
  mkdirSync(join(root, 'etc', 'systemd', 'system', 'my-llm.service.d'), { recursive: true });
}

/** Run verify; every line it prints is a finding (warnings included). */
function verify(unit: string): { status: number | null; output: string } {
  const result = spawnSync('systemd-analyze', ['verify', `--root=${root}`, unit], { encoding: 'utf8', timeout: 60_000 });
  return { status: result.status, output: `${result.stdout}${result.stderr}`.trim() };
}

describe.skipIf(!haveAnalyze && !inCi)('shipped systemd units', () => {
  it('systemd-analyze is installed (required in CI)', () => {
    expect(haveAnalyze, 'systemd-analyze is missing: install Debian\'s systemd package (apt-get install -y systemd)').toBe(true);
  });

  it('the vllm@.service template verifies without warnings', () => {
    prepareRoot();
    writeFileSync(join(root, 'etc', 'systemd', 'system', 'vllm@.service'), unitTemplate);
    const result = verify('vllm@llama.service');
    expect(result.output).toBe('');
    expect(result.status).toBe(0);
  });

  it('the drop-in verifies without warnings on a minimal service', () => {
    prepareRoot();
    writeFileSync(join(root, 'etc', 'systemd', 'system', 'my-llm.service'), '[Unit]\nDescription=An LLM server\n\n[Service]\nExecStart=vllm serve some-model\nRestart=on-failure\nRestartSec=10\n');
    writeFileSync(join(root, 'etc', 'systemd', 'system', 'my-llm.service.d', 'gpugate-wait.conf'), dropIn);
    const result = verify('my-llm.service');
    expect(result.output).toBe('');
    expect(result.status).toBe(0);
  });

  it('would report a warning (the check can fail)', () => {
    prepareRoot();
    writeFileSync(join(root, 'etc', 'systemd', 'system', 'broken.service'), '[Service]\nExecStart=vllm serve x\nRestartSteps=5\n');
    expect(verify('broken.service').output).toContain("Unknown key 'RestartSteps'");
  });
});

describe('the contract lines in the shipped files', () => {
  it.each([['vllm@.service', unitTemplate], ['gpugate-wait.conf', dropIn]])('%s has the wait, no stop wait, the start timeout, the start limits and NotifyAccess', (_name, text) => {
    const lines = text.split('\n').filter((line) => !line.startsWith('#'));
    expect(lines).toContain('ExecStartPre=/usr/local/bin/gpugate wait --for vllm --min-free 0.9 --margin 2GiB --stable 5s --timeout 240s --notify');
    // A wait in ExecStopPost= counts against the stop timeout, delays `systemctl stop` and runs
    // before ExecStartPre= could stop a leftover: the start wait is the only wait.
    expect(lines.some((line) => line.startsWith('ExecStopPost=') && line.includes('gpugate wait'))).toBe(false);
    expect(lines).toContain('TimeoutStartSec=300');
    expect(lines).toContain('StartLimitIntervalSec=30min');
    expect(lines).toContain('StartLimitBurst=6');
    expect(lines).toContain('NotifyAccess=exec');
    // Never a "-" on the wait step: its failure must fail the start.
    expect(lines.some((line) => line.startsWith('ExecStartPre=-'))).toBe(false);
    // systemd 252 (Debian 12) does not know these: comments only.
    expect(lines.some((line) => /^Restart(Steps|MaxDelaySec)=/.test(line))).toBe(false);
    expect(text).toMatch(/^# RestartSteps=/m);
  });
});
