/**
 * `--notify`: publishes progress as `STATUS=` datagrams on systemd's `$NOTIFY_SOCKET`, so
 * `systemctl status` shows what the start is waiting for (needs `NotifyAccess=exec` or `all`
 * on the unit). Sending goes through the addon, since Node's dgram has no unix sockets. It
 * never sends READY=1: that is the service's own business.
 */

import type { Logger } from './logger';

interface NotifyModule {
  sdNotify(text: string, socketPath?: string): boolean;
}

/** A function that publishes one status line (failures are logged once, never thrown). */
export type StatusPublisher = (status: string) => void;

/** Create the publisher; with no `$NOTIFY_SOCKET`, say so once and do nothing. */
export function createStatusNotifier(env: NodeJS.ProcessEnv, logger: Logger): StatusPublisher {
  const socketPath = env.NOTIFY_SOCKET;
  if (socketPath === undefined || socketPath === '') {
    logger.debug('--notify: NOTIFY_SOCKET is not set (not started by systemd with NotifyAccess=); status updates are skipped');
    return () => undefined;
  }
  let failed = false;
  return (status: string): void => {
    if (failed) return;
    try {
      const { sdNotify } = require('../host/notify') as NotifyModule;
      sdNotify(`STATUS=${status.replace(/\n/g, ' ')}`, socketPath);
    } catch (error) {
      failed = true;
      logger.warning(`--notify: cannot send to NOTIFY_SOCKET=${socketPath}: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
}
