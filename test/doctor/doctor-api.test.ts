/**
 * runDoctor() as a library call: on a session the caller opened (left open afterwards), with the
 * host readers pointed at prepared files, and with checks the caller adds (the hook a systemd unit
 * check plugs into) reported with the rest and counted in the status.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { runDoctor, type DoctorCheck } from '../../src/index';
import { simDevice, testTempDir } from '../helpers/sim';
import { closeTrackedSessions, openTrackedSession } from '../helpers/tracked-sessions';
import { freshSimulator, useScenario } from '../helpers/session-helpers';

const work = fs.mkdtempSync(path.join(testTempDir(), 'doctor-api-'));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));
afterEach(closeTrackedSessions);

describe('runDoctor()', () => {
  it('uses the caller\'s session and leaves it open; adds the caller\'s checks last and counts them in the status', async () => {
    useScenario({ devices: [simDevice(0), simDevice(1, { migModePending: true })] });
    const session = await openTrackedSession(freshSimulator());
    const log = path.join(work, 'kernel.log');
    fs.writeFileSync(log, '');
    const unitCheck: DoctorCheck = {
      id: 'unit.restart-limits', subject: 'unit vllm.service', status: 'fail',
      summary: 'Restart=on-failure with the default start limits never stops a crash loop', evidence: { restart: 'on-failure' }, advice: 'set StartLimitBurst=',
    };
    const report = await runDoctor({
      session, kernelLogPath: log, devDir: path.join(work, 'no-dev'), kernelModuleVersionPath: path.join(work, 'no-version'),
      unitChecks: async () => [unitCheck],
    });
    expect(session.closed).toBe(false);
    expect((await session.snapshot()).devices).toHaveLength(2);
    expect(report.gpuCount).toBe(2);
    expect(report.library?.driverVersion).toBe('580.95.05');
    expect(report.checks.at(-1)).toEqual(unitCheck);
    expect(report.status).toBe('fail');
    expect(report.checks.find((c) => c.id === 'gpu.mig-mode' && c.subject.startsWith('GPU 1 '))?.status).toBe('warn');
    expect(report.checks.find((c) => c.id === 'host.device-nodes')?.status).toBe('fail');
    expect(report.checks.find((c) => c.id === 'driver.version-match')?.status).toBe('warn');
    const subjects = [...new Set(report.checks.map((c) => c.subject))];
    expect(subjects).toEqual(['driver', 'GPU 0 (GPU-7e570000-0000-4000-8000-000000000000)', 'GPU 1 (GPU-7e570000-0000-4000-8000-000000000001)', 'kernel log', 'host', 'unit vllm.service']);
  });

  it('reports a library that cannot be loaded as a failed driver check, not an exception', async () => {
    const report = await runDoctor({ libraryPath: path.join(work, 'no-such-libnvidia-ml.so.1'), kernelLogPath: path.join(work, 'no-log') });
    expect(report.library).toBeNull();
    expect(report.gpuCount).toBe(0);
    expect(report.checks[0]).toMatchObject({ id: 'driver.nvml', status: 'fail', evidence: { code: 'GPUGATE_LIBRARY_NOT_FOUND' } });
    expect(report.checks.find((c) => c.id === 'kernel.log')).toMatchObject({ status: 'warn' });
    expect(report.status).toBe('fail');
  });
});
