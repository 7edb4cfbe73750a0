/**
 * The host's GPU sizes for `gpugate systemd`: one short NVML session, memory only. The drop-in is
 * still printed when NVML cannot be read (a unit prepared off the GPU host), and says that its
 * gate was not checked against any GPU.
 */
import { gpuSizesOf, type GpuSize } from '../gate/idle-room';
import { DEFAULT_CALL_TIMEOUT_MS } from '../nvml/call-timeout';
import { closeSession, openSession, withBackstop } from './nvml-session';

/** The sizes, or why there are none. */
export type HostGpuSizes = { kind: 'read'; gpus: GpuSize[] } | { kind: 'unknown'; reason: string };

/** Read every GPU's total and reserved memory; never throws. */
export async function readHostGpuSizes(callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS): Promise<HostGpuSizes> {
  let session: Awaited<ReturnType<typeof openSession>> | null = null;
  try {
    session = await openSession(undefined, callTimeoutMs);
    const snapshot = await withBackstop(session.snapshot({ memoryOnly: true }), callTimeoutMs, 'reading GPU memory');
    const gpus = gpuSizesOf(snapshot.devices);
    return gpus.length > 0 ? { kind: 'read', gpus } : { kind: 'unknown', reason: 'NVML lists no GPU whose memory it can read' };
  } catch (error) {
    return { kind: 'unknown', reason: (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? '' };
  } finally {
    await closeSession(session);
  }
}
