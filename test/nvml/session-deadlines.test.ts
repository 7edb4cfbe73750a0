/**
 * The per-call deadline counts from the moment the session's NVML thread starts a call, not from
 * its submission: a healthy backlog longer than the deadline never poisons a session; the
 * queue is bounded (MAX_PENDING_CALLS) and excess work is refused at once with its own code;
 * one watchdog timer serves every pending call; a call that really is stuck still poisons the
 * session, and the calls queued behind it are rejected with it; close() waits for the backlog.
 */
import { describe, expect, it } from 'vitest';
import { MAX_PENDING_CALLS, openNvml } from '../../src/nvml/session';
import { simDevice, writeScenario } from '../helpers/sim';
import { freshSimulator } from '../helpers/session-helpers';

/** Two GPUs with `fault` on GPU 0's memory reads (a delay, or a hang from some call on). */
function slowHost(fault: Record<string, unknown>): void {
  process.env['GPUGATE_SIM_SCENARIO'] = writeScenario({
    devices: [simDevice(0), simDevice(1)],
    faults: [{ function: 'nvmlDeviceGetMemoryInfo_v2', device: 0, ...fault }],
  });
}

const DEADLINE_MS = 250;
const READ_DELAY_MS = 20; // one call: far inside the deadline

function activeTimers(): number {
  return process.getActiveResourcesInfo().filter((name) => name === 'Timeout').length;
}

describe('a backlog of healthy calls on one session', () => {
  it('takes longer than the deadline in total, every call answers, and the session stays open', async () => {
    slowHost({ delayMs: READ_DELAY_MS });
    const session = await openNvml({ libraryPath: freshSimulator(), callTimeoutMs: DEADLINE_MS });
    try {
      const timersBefore = activeTimers();
      const count = 3 * Math.ceil(DEADLINE_MS / READ_DELAY_MS); // about three deadlines of work in the queue
      const pending = Array.from({ length: count }, () => session.snapshot({ memoryOnly: true }));
      // One watchdog for all of them, not a timer per call.
      expect(activeTimers() - timersBefore).toBeLessThanOrEqual(1);
      const results = await Promise.allSettled(pending);
      expect(results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason as unknown)).toEqual([]);
      expect(results).toHaveLength(count);
      expect(session.closed).toBe(false);
      expect((await session.snapshot()).devices).toHaveLength(2);
    } finally {
      await session.close();
    }
  });

  it(`refuses calls beyond ${MAX_PENDING_CALLS} pending at once with GPUGATE_QUEUE_FULL, runs the rest, and stays healthy`, async () => {
    process.env['GPUGATE_SIM_SCENARIO'] = writeScenario({ devices: [simDevice(0), simDevice(1)] });
    const session = await openNvml({ libraryPath: freshSimulator() });
    try {
      const submitted = 15_000;
      let refusedBeforeFirstAnswer: number | null = null;
      let refused = 0;
      const pending = Array.from({ length: submitted }, () =>
        session.snapshot({ memoryOnly: true }).then(
          (snapshot) => {
            refusedBeforeFirstAnswer ??= refused;
            return snapshot;
          },
          (error: unknown) => {
            refused += 1;
            throw error;
          },
        ),
      );
      const results = await Promise.allSettled(pending);
      const answered = results.filter((r) => r.status === 'fulfilled');
      const rejected = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason as { code?: string; message?: string });
      expect(answered).toHaveLength(MAX_PENDING_CALLS);
      expect(rejected).toHaveLength(submitted - MAX_PENDING_CALLS);
      expect(new Set(rejected.map((e) => e.code))).toEqual(new Set(['GPUGATE_QUEUE_FULL']));
      expect(rejected[0]?.message).toContain(`${MAX_PENDING_CALLS} calls are already pending`);
      expect(rejected[0]?.message).not.toMatch(/stuck|did not answer/);
      // Refused at once: every refusal settled before the first native answer arrived.
      expect(refusedBeforeFirstAnswer).toBe(submitted - MAX_PENDING_CALLS);
      expect(session.closed).toBe(false);
      expect((await session.snapshot({ processes: true })).devices).toHaveLength(2);
    } finally {
      await session.close();
    }
  });

  it('close() waits for a backlog longer than the deadline and resolves after every call answered', async () => {
    slowHost({ delayMs: READ_DELAY_MS });
    const session = await openNvml({ libraryPath: freshSimulator(), callTimeoutMs: DEADLINE_MS });
    const order: string[] = [];
    const count = 2 * Math.ceil(DEADLINE_MS / READ_DELAY_MS);
    const pending = Array.from({ length: count }, (_, i) => session.snapshot({ memoryOnly: true }).then(() => order.push(`snapshot ${i}`)));
    await session.close();
    order.push('closed');
    await Promise.all(pending);
    expect(order).toHaveLength(count + 1);
    expect(order.at(-1)).toBe('closed');
  });
});

describe('a stuck call inside a backlog', () => {
  it('is rejected with the stuck-call diagnosis; the calls queued behind it are rejected with it; earlier ones answered', async () => {
    slowHost({ hang: true, fromCall: 6 }); // the fourth snapshot's read of GPU 0 never returns (reads of both GPUs count)
    const session = await openNvml({ libraryPath: freshSimulator(), callTimeoutMs: DEADLINE_MS });
    const outcomes: string[] = [];
    const pending = Array.from({ length: 6 }, (_, i) =>
      session.snapshot({ memoryOnly: true }).then(
        () => outcomes.push(`${i} answered`),
        (error: { code?: string; message?: string }) => {
          outcomes.push(`${i} ${error.code ?? '?'}`);
          return error;
        },
      ),
    );
    const settled = await Promise.all(pending);
    // Only the stuck call timed out; the calls queued behind it never started: the poisoning closed the session under them.
    expect(outcomes).toEqual(['0 answered', '1 answered', '2 answered', '3 GPUGATE_TIMEOUT', '4 GPUGATE_SESSION_CLOSED', '5 GPUGATE_SESSION_CLOSED']);
    expect((settled[3] as { message: string }).message).toMatch(
      new RegExp(`snapshot did not answer within ${DEADLINE_MS} ms: nvmlDeviceGetMemoryInfo_v2 on GPU 0 is stuck in the driver`),
    );
    expect((settled[4] as { message: string }).message).toMatch(/earlier NVML call missed its deadline/);
    expect((settled[4] as { cause: unknown }).cause).toBe(settled[3]);
    expect(session.closed).toBe(true);
    await expect(session.snapshot()).rejects.toMatchObject({ code: 'GPUGATE_SESSION_CLOSED', cause: settled[3] });
    await session.close();
  });

  it('a close queued behind a stuck call rejects with GPUGATE_TIMEOUT instead of waiting for ever', async () => {
    slowHost({ hang: true });
    const session = await openNvml({ libraryPath: freshSimulator(), callTimeoutMs: DEADLINE_MS });
    const stuck = session.snapshot();
    stuck.catch(() => undefined);
    await expect(session.close()).rejects.toMatchObject({ code: 'GPUGATE_TIMEOUT', fn: 'nvmlShutdown' });
    await expect(stuck).rejects.toMatchObject({ code: 'GPUGATE_TIMEOUT', device: 0, fn: 'nvmlDeviceGetMemoryInfo_v2' });
  });
});
