/**
 * The NVML session of a gate: the caller's (left open), or one opened here and shared by every
 * gate of the process with the same library and call deadline, closed when the last one ends.
 */
import type { GpuDevice, NvmlSession, OpenNvmlOptions } from '../types';
import { openNvml } from '../nvml/session';

/** What opening a session takes: the caller's own, or how to open one. */
export interface SessionOptions {
  session?: NvmlSession;
  libraryPath?: string;
  callTimeoutMs?: number;
}

interface SharedSession {
  session: Promise<NvmlSession>;
  refs: number;
}
const sharedSessions = new Map<string, SharedSession>();
const deviceLists = new WeakMap<NvmlSession, Promise<GpuDevice[]>>();

/** The session to use: the caller's (left open), or one opened here and shared in-process; `release` closes what was opened. */
export async function acquireSession(options: SessionOptions): Promise<{ session: NvmlSession; release: () => Promise<void> }> {
  if (options.session) return { session: options.session, release: async () => {} };
  const key = `${options.libraryPath ?? ''}\u0000${options.callTimeoutMs ?? ''}`;
  let entry = sharedSessions.get(key);
  if (!entry || entry.refs === 0) {
    const openOptions: OpenNvmlOptions = {};
    if (options.libraryPath !== undefined) openOptions.libraryPath = options.libraryPath;
    if (options.callTimeoutMs !== undefined) openOptions.callTimeoutMs = options.callTimeoutMs;
    entry = { session: openNvml(openOptions), refs: 0 };
    sharedSessions.set(key, entry);
  }
  const current = entry;
  current.refs += 1;
  let session: NvmlSession;
  try {
    session = await current.session;
  } catch (error) {
    current.refs -= 1;
    if (sharedSessions.get(key) === current) sharedSessions.delete(key);
    throw error;
  }
  let released = false;
  return {
    session,
    release: async () => {
      if (released) return;
      released = true;
      current.refs -= 1;
      if (current.refs === 0) {
        if (sharedSessions.get(key) === current) sharedSessions.delete(key);
        await session.close().catch(() => {});
      }
    },
  };
}

/** Every device with every field, MIG instances included: what a selection by MIG UUID needs. Read once per session. */
export function deviceList(session: NvmlSession): Promise<GpuDevice[]> {
  let list = deviceLists.get(session);
  if (!list) {
    list = session.snapshot().then((snapshot) => snapshot.devices);
    deviceLists.set(session, list);
    list.catch(() => deviceLists.delete(session));
  }
  return list;
}
