/**
 * `gpugate systemd --unit` and `gpugate doctor --unit` under a real systemd 252 (booted in its
 * own namespaces, see container.ts), reading the unit through a real `systemctl show`: the seed
 * unit is judged failing, the drop-in is written, systemd loads it on daemon-reload, the unit
 * then passes every check, and writing again finds it up to date. Needs root and systemd;
 * skipped with the reason otherwise.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cannotRunReason, SystemdContainer } from './container';
import { repo } from './incident';

const reason = cannotRunReason();
if (reason !== null) console.warn(`e2e-systemd unit tools: skipped: ${reason}`);

const cli = join(repo, 'dist', 'cli', 'main.js');
const SEED = '[Unit]\nDescription=An LLM server\n\n[Service]\nExecStart=/usr/local/bin/fake-llm serve m --gpu-memory-utilization 0.85\nRestart=on-failure\nRestartSec=10\n';

/** The unit's checks of `gpugate doctor --unit`, run inside the container (systemctl show there); the host's checks are left out. */
function checksInside(c: SystemdContainer, unit: string): Array<{ id: string; status: string; summary: string }> {
  const run = c.exec([process.execPath, cli, 'doctor', '--json', '--kernel-log', '/dev/null', '--unit', unit]);
  if (run.stdout.trim() === '') throw new Error(`gpugate doctor printed nothing (${String(run.status)}): ${run.stderr}`);
  const document = JSON.parse(run.stdout) as { checks: Array<{ id: string; subject: string; status: string; summary: string }> };
  return document.checks.filter((check) => check.subject === `unit ${unit}`);
}

describe.skipIf(reason !== null)('gpugate systemd under a real systemd', () => {
  let c: SystemdContainer;

  beforeAll(async () => {
    c = new SystemdContainer();
    // The boot target boot-container.sh starts, as in the incident suite.
    c.addFile('/etc/systemd/system.conf.d/e2e.conf', '[Manager]\nShowStatus=no\n');
    c.addFile('/etc/systemd/system/gpugate-e2e.target', '[Unit]\nDescription=gpugate end-to-end suite\nRequires=sysinit.target\nAfter=sysinit.target\n');
    c.addFile('/usr/local/bin/fake-llm', '#!/bin/sh\nexec sleep infinity\n', 0o755);
    c.addFile('/etc/systemd/system/llm.service', SEED);
    await c.boot(join(repo, 'test', 'e2e-systemd', 'boot-container.sh'));
  }, 60_000);

  afterAll(async () => {
    await c?.close();
  });

  it('judges the seed unit, read with systemctl show, failing: no gate, a start limit that never trips', () => {
    const checks = checksInside(c, 'llm.service');
    expect(checks).toHaveLength(6);
    expect(checks.find((x) => x.id === 'unit.gate')?.status).toBe('fail');
    expect(checks.find((x) => x.id === 'unit.restart-limits')).toMatchObject({ status: 'fail', summary: expect.stringContaining('StartLimitIntervalSec=10s') });
  });

  it('prints the drop-in fitted to what systemctl show reports', () => {
    const run = c.exec([process.execPath, cli, 'systemd', '--unit', 'llm', '--json']);
    expect(run.status, run.stderr).toBe(0);
    const document = JSON.parse(run.stdout) as Record<string, unknown>;
    expect(document).toMatchObject({ minFree: 0.85, minFreeFrom: 'gpu-memory-utilization', startLimitIntervalSec: 1800, timeoutStartSec: 300, written: null,
      unit: { name: 'llm.service', source: 'systemctl', fragmentPath: '/etc/systemd/system/llm.service', dropInPaths: [] } });
  });

  it('--write, daemon-reload: systemd applies it, every check passes, and a second write finds it up to date', () => {
    const write = c.exec([process.execPath, cli, 'systemd', '--unit', 'llm', '--write']);
    expect(write.status, write.stderr).toBe(0);
    expect(write.stdout).toContain('/etc/systemd/system/llm.service.d/gpugate.conf written');
    expect(c.systemctl('daemon-reload').status).toBe(0);
    const shown = c.show('llm.service', 'StartLimitIntervalUSec', 'StartLimitBurst', 'NotifyAccess', 'TimeoutStartUSec', 'ExecStartPre', 'DropInPaths');
    expect(shown).toMatchObject({ StartLimitIntervalUSec: '30min', StartLimitBurst: '6', NotifyAccess: 'exec', TimeoutStartUSec: '5min', DropInPaths: '/etc/systemd/system/llm.service.d/gpugate.conf' });
    expect(shown['ExecStartPre']).toContain(`argv[]=${process.execPath} --disable-sigusr1 ${cli} wait --for vllm --min-free 0.85 --margin 2GiB --stable 5s --timeout 240s --notify ;`);
    expect(checksInside(c, 'llm.service').filter((x) => x.status !== 'pass')).toEqual([]);
    const again = c.exec([process.execPath, cli, 'systemd', '--unit', 'llm', '--write']);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).toBe('/etc/systemd/system/llm.service.d/gpugate.conf is already up to date\n');
  });

  it('names a unit systemd does not know (exit 78)', () => {
    const run = c.exec([process.execPath, cli, 'systemd', '--unit', 'no-such-llm']);
    expect(run.status).toBe(78);
    expect(run.stderr).toContain('unit no-such-llm.service is not loaded (LoadState=not-found');
  });
});
