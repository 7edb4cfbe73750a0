/**
 * sdNotify(): tell systemd (Type=notify) about readiness or status, without libsystemd.
 */
import { loadBinding } from '../nvml/binding';
import { ConfigError } from '../config-error';

/**
 * Sends `text` (e.g. 'READY=1', 'STATUS=waiting for GPU 3', 'EXTEND_TIMEOUT_USEC=30000000') as one
 * datagram to `socketPath` (default: $NOTIFY_SOCKET; a leading '@' is the abstract namespace).
 * Returns false when no socket is set (not started by systemd), true once sent; throws an Error
 * naming the socket when sending fails.
 */
export function sdNotify(text: string, socketPath: string | undefined = process.env['NOTIFY_SOCKET']): boolean {
  if (typeof text !== 'string') throw new ConfigError('text', 'gpugate: sdNotify(text): text must be a string such as "READY=1"');
  if (socketPath === undefined || socketPath === '') return false;
  loadBinding().sendNotify(socketPath, text);
  return true;
}
