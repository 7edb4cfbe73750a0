/**
 * Sessions opened by a test file and closed after each test, newest first, so that a failing
 * test never leaves an NVML session (and its worker thread) open for the next one.
 */
import { openNvml } from '../../src/nvml/session';
import type { NvmlMemoryReader } from '../../src/types';

const tracked: NvmlMemoryReader[] = [];

/** Keep `session` (opened some other way) to be closed by closeTrackedSessions(). */
export function trackSession<T extends NvmlMemoryReader>(session: T): T {
  tracked.push(session);
  return session;
}

/** Open a session on the NVML library at `libraryPath`, closed by closeTrackedSessions(). */
export async function openTrackedSession(libraryPath: string): Promise<NvmlMemoryReader> {
  return trackSession(await openNvml({ libraryPath }));
}

/**
 * Close every tracked session, newest first (use as, or from, an afterEach hook). With
 * `ignoreFailures`, a close that rejects (a session its test crashed or timed out on purpose) does
 * not stop the others.
 */
export async function closeTrackedSessions(options: { ignoreFailures?: boolean } = {}): Promise<void> {
  while (tracked.length > 0) {
    const session = tracked.pop();
    if (options.ignoreFailures === true) await session?.close().catch(() => undefined);
    else await session?.close();
  }
}
