/**
 * Opening and closing the command's one NVML session. The session enforces the per-call
 * deadline itself; this module adds the call backstop (src/nvml/call-backstop.ts) so that even
 * an open that never settles ends the command with exit 69 shortly after --nvml-timeout, and
 * closes without waiting on a call that is stuck in the driver.
 */

import { withCallBackstop } from '../nvml/call-backstop';
import type { NvmlSession } from '../types';

/**
 * Open NVML (lazily loading the addon). Rejects with the NvmlError (exit 69), the backstop's
 * included, or at once with a DriverStuckError when an earlier NVML helper is stuck in the kernel.
 */
export async function openSession(libraryPath: string | undefined, callTimeoutMs: number): Promise<NvmlSession> {
  const { refuseIfDriverStuck } = require('../gate/stuck-driver') as typeof import('../gate/stuck-driver');
  await refuseIfDriverStuck({ stuckAfterMs: callTimeoutMs });
  const { openNvml } = require('../nvml/session') as typeof import('../nvml/session');
  const opening = Promise.resolve(openNvml({ ...(libraryPath !== undefined ? { libraryPath } : {}), callTimeoutMs }));
  return withBackstop(opening, callTimeoutMs, 'opening NVML');
}

/**
 * Settle with `promise`, or reject once the call backstop has passed with its NvmlError
 * (GPUGATE_TIMEOUT, exit 69), naming --nvml-timeout, where the command's deadline was set.
 */
export function withBackstop<T>(promise: Promise<T>, callTimeoutMs: number, what: string): Promise<T> {
  return withCallBackstop(promise, callTimeoutMs, what, '--nvml-timeout');
}

/** Close the session; never waits more than a second (a poisoned session may hold a stuck thread). */
export async function closeSession(session: NvmlSession | null): Promise<void> {
  if (session === null || session.closed) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    session.close().catch(() => undefined),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, 1000);
      timer.unref();
    }),
  ]);
  clearTimeout(timer);
}
