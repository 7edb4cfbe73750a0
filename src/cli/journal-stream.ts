/**
 * Decides whether stderr is connected to the journal. systemd sets `JOURNAL_STREAM=<dev>:<ino>`
 * for the stream it gives a unit; the variable is inherited by children whose stderr may point
 * elsewhere, so it only counts when it equals the device and inode of fd 2 right now.
 */

import { fstatSync } from 'node:fs';

/**
 * True when `JOURNAL_STREAM` names the file descriptor `fd` (stderr by default): then journald
 * reads `<N>` priority prefixes on each line.
 */
export function isJournalStream(env: NodeJS.ProcessEnv = process.env, fd = 2): boolean {
  const value = env.JOURNAL_STREAM;
  if (value === undefined || value === '') return false;
  const match = /^(\d+):(\d+)$/.exec(value);
  if (match === null) return false;
  let stat;
  try {
    stat = fstatSync(fd, { bigint: true });
  } catch {
    return false;
  }
  return stat.dev === BigInt(match[1] as string) && stat.ino === BigInt(match[2] as string);
}
