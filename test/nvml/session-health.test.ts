/**
 * session.health(): the health readings of one GPU through the real addon and the simulator, per
 * GPU model default, from scenario fields, with an injected failure, on a driver profile that
 * lacks a query, and with bad arguments.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config-error';
import { simDevice } from '../helpers/sim';
import { closeTrackedSessions, openTrackedSession } from '../helpers/tracked-sessions';
import { freshSimulator, useScenario } from '../helpers/session-helpers';

afterEach(closeTrackedSessions);

describe('session.health() reads what doctor judges, as NVML answers it', () => {
  it('reports per-model defaults: an idle RTX PRO 6000 remaps rows, has no page retirement and no fabric; an H100 registers with the fabric', async () => {
    useScenario({ devices: [simDevice(0), simDevice(1, { name: 'NVIDIA H100 80GB HBM3' }), simDevice(2, { name: 'Tesla V100-SXM2-32GB' })] });
    const session = await openTrackedSession(freshSimulator());
    const blackwell = await session.health(0);
    expect(blackwell).toMatchObject({
      index: 0,
      migMode: { current: false, pending: false },
      remappedRows: { correctable: 0, uncorrectable: 0, pending: false, failureOccurred: false },
      volatileUncorrectedEccErrors: 0,
      retiredPagesPending: null,
      clockEventReasons: ['gpu_idle'],
      clockEventReasonBits: 1,
      pcie: { generation: 5, maxGeneration: 5, width: 16, maxWidth: 16 },
      fabric: null,
    });
    expect(blackwell.fieldErrors['retiredPagesPending']).toMatchObject({ code: 'NVML_ERROR_NOT_SUPPORTED', fn: 'nvmlDeviceGetRetiredPagesPendingStatus' });
    expect(blackwell.fieldErrors['fabric']).toMatchObject({ code: 'NVML_ERROR_NOT_SUPPORTED', fn: 'nvmlDeviceGetGpuFabricInfo' });
    expect(session.library.variants['deviceGetCurrentClocksEventReasons']).toBe('nvmlDeviceGetCurrentClocksEventReasons');
    expect((await session.health(1)).fabric).toEqual({ state: 'completed', status: 'NVML_SUCCESS', cliqueId: 0 });
    const volta = await session.health(2);
    expect(volta.retiredPagesPending).toBe(false);
    expect(volta.remappedRows).toBeNull();
    expect(volta.pcie).toEqual({ generation: 3, maxGeneration: 3, width: 16, maxWidth: 16 });
  });

  it('reports the scenario fields: a pending MIG change, failed row remapping, ECC errors, hardware slowdown, a narrowed link, a fabric failure', async () => {
    useScenario({
      devices: [simDevice(0, {
        migMode: false,
        migModePending: true,
        remappedRows: { correctable: 2, uncorrectable: 1, pending: true, failureOccurred: true },
        eccErrors: { uncorrected: 3 },
        clockEventReasons: ['hw_slowdown', 'hw_power_brake_slowdown'],
        pcieLink: { generation: 3, maxGeneration: 5, width: 8, maxWidth: 16 },
        fabric: { state: 'completed', status: 999, cliqueId: 7 },
      })],
    });
    const session = await openTrackedSession(freshSimulator());
    const health = await session.health(0);
    expect(health).toMatchObject({
      migMode: { current: false, pending: true },
      remappedRows: { correctable: 2, uncorrectable: 1, pending: true, failureOccurred: true },
      volatileUncorrectedEccErrors: 3,
      clockEventReasons: ['hw_slowdown', 'hw_power_brake_slowdown'],
      clockEventReasonBits: 0x88,
      pcie: { generation: 3, maxGeneration: 5, width: 8, maxWidth: 16 },
      fabric: { state: 'completed', status: 'NVML_ERROR_UNKNOWN', cliqueId: 7 },
    });
  });

  it('keeps an injected failure on its field only, with the code and symbol NVML returned', async () => {
    useScenario({ devices: [simDevice(0)], faults: [{ function: 'nvmlDeviceGetRemappedRows', return: 15 }] });
    const session = await openTrackedSession(freshSimulator());
    const health = await session.health(0);
    expect(health.remappedRows).toBeNull();
    expect(health.fieldErrors['remappedRows']).toMatchObject({ code: 'NVML_ERROR_GPU_IS_LOST', nvmlReturn: 15, fn: 'nvmlDeviceGetRemappedRows' });
    expect(health.pcie.width).toBe(16);
  });

  it('reports FUNCTION_NOT_FOUND for a query the driver profile does not export, and binds the older throttle-reasons name', async () => {
    useScenario({ system: { driverVersion: '410.129', nvmlVersion: '10.410.129', cudaDriverVersion: 10000 }, devices: [simDevice(0)] });
    const session = await openTrackedSession(freshSimulator('gpugate_sim_legacy'));
    const health = await session.health(0);
    expect(health.fieldErrors['remappedRows']).toMatchObject({ code: 'NVML_ERROR_FUNCTION_NOT_FOUND', fn: 'nvmlDeviceGetRemappedRows' });
    expect(health.fieldErrors['fabric']?.code).toBe('NVML_ERROR_FUNCTION_NOT_FOUND');
    expect(session.library.variants['deviceGetCurrentClocksEventReasons']).toBe('nvmlDeviceGetCurrentClocksThrottleReasons');
    expect(health.clockEventReasons).toEqual(['gpu_idle']);
  });

  it('rejects a scenario with a bad health field, naming the field and what it expected', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ clockEventReasons: ['hw_slowdwn'] }, /expected one of gpu_idle, .*hw_slowdown.* in "clockEventReasons"/],
      [{ pcieLink: { generation: 5, maxGeneration: 4, width: 16 } }, /expected generation <= maxGeneration and width <= maxWidth in "pcieLink"/],
      [{ remappedRows: { failed: true } }, /found unknown key "failed"/],
      [{ fabric: { state: 'done' } }, /expected "not_supported", "not_started", "in_progress" or "completed" for "state" in "fabric"/],
    ];
    for (const [fields, message] of cases) {
      useScenario({ devices: [simDevice(0, fields)] });
      await expect(openTrackedSession(freshSimulator())).rejects.toThrow(message);
    }
  });

  it('follows a timeline change of a health field (a remap becomes pending at 0 ms)', async () => {
    useScenario({ devices: [simDevice(0)], timeline: [{ atMs: 0, device: 0, set: { remappedRows: { correctable: 1, pending: true }, pcieLink: { generation: 5, width: 4, maxWidth: 16 } } }] });
    const session = await openTrackedSession(freshSimulator());
    const health = await session.health(0);
    expect(health.remappedRows).toEqual({ correctable: 1, uncorrectable: 0, pending: true, failureOccurred: false });
    expect(health.pcie).toMatchObject({ width: 4, maxWidth: 16 });
  });

  it('rejects an index that is not a device of the session, and a closed session', async () => {
    useScenario({ devices: [simDevice(0)] });
    const session = await openTrackedSession(freshSimulator());
    await expect(session.health(1)).rejects.toThrow(/not a device index of this host \(0\.\.0\)/);
    await expect(session.health(-1)).rejects.toSatisfy((error) => error instanceof ConfigError && error.code === 'GPUGATE_CONFIG' && error.option === 'index');
    await session.close();
    await expect(session.health(0)).rejects.toMatchObject({ code: 'GPUGATE_SESSION_CLOSED' });
  });
});
