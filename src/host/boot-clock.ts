/**
 * The boot clock: CLOCK_BOOTTIME as /proc/uptime shows it, tied to the boot it belongs to by
 * /proc/sys/kernel/random/boot_id. It runs through suspend and no wall-clock step (NTP, an
 * administrator, a resumed VM) moves it, so durations that must survive such steps run on it.
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';

function readSmall(file: string): string | null {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return null;
  }
}

/** The boot this is and how long ago it began (CLOCK_BOOTTIME, which runs through suspend and ignores wall-clock steps). */
export interface BootClock {
  bootId: string | null;
  sinceBootMs: number | null;
}

/** The boot clock now, from /proc/sys/kernel/random/boot_id and the first field of /proc/uptime (10 ms resolution). */
export function readBootClock(procRoot: string): BootClock {
  const uptime = readSmall(path.join(procRoot, 'uptime'));
  const seconds = uptime === null ? Number.NaN : Number(uptime.split(/\s+/)[0]);
  return {
    bootId: readSmall(path.join(procRoot, 'sys', 'kernel', 'random', 'boot_id')),
    sinceBootMs: Number.isFinite(seconds) && seconds >= 0 ? Math.round(seconds * 1000) : null,
  };
}

