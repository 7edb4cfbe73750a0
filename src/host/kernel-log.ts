/**
 * Reads the kernel's log without ever blocking: /dev/kmsg opened O_NONBLOCK and read record by
 * record until EAGAIN (the end of the ring buffer, this boot only), or any other file read to its
 * end (a saved `dmesg` or `journalctl -k` output). Where /dev/kmsg cannot be read (no privilege,
 * a container without it) `journalctl -k -b` is asked instead, under a deadline.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';

/** The kernel log device. */
export const KMSG_PATH = '/dev/kmsg';
/** Most bytes read from one source: far beyond any ring buffer, a bound for a runaway file. */
const MAX_LOG_BYTES = 64 * 1024 * 1024;
/** How long `journalctl -k` may take. */
const JOURNALCTL_TIMEOUT_MS = 5000;
/** Big enough for any one /dev/kmsg record (a smaller read of a record fails with EINVAL). */
const RECORD_BUFFER_BYTES = 16 * 1024;

/** The log text and where it came from, or why none could be read. */
export type KernelLog =
  | { kind: 'ok'; source: string; text: string }
  | { kind: 'unreadable'; source: string; reason: string };

/**
 * Reads every record of `file` without blocking: reads end at EAGAIN (kmsg has no more records)
 * or at end of file; EPIPE (a record was overwritten while reading) skips ahead.
 */
export function readNonBlocking(file: string): string {
  const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    const buffer = Buffer.alloc(RECORD_BUFFER_BYTES);
    for (;;) {
      let count: number;
      try {
        count = fs.readSync(fd, buffer, 0, buffer.length, null);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'EAGAIN' || code === 'EWOULDBLOCK') break;
        if (code === 'EPIPE') continue;
        throw error;
      }
      if (count === 0) break;
      chunks.push(Buffer.from(buffer.subarray(0, count)));
      total += count;
      if (total >= MAX_LOG_BYTES) break;
    }
  } finally {
    fs.closeSync(fd);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function journalctlKernel(): Promise<KernelLog> {
  const source = 'journalctl -k -b';
  return new Promise((resolve) => {
    execFile('journalctl', ['-k', '-b', '--no-pager', '-q', '-o', 'short-monotonic'],
      { timeout: JOURNALCTL_TIMEOUT_MS, maxBuffer: MAX_LOG_BYTES, encoding: 'utf8' },
      (error, stdout) => {
        if (error !== null) resolve({ kind: 'unreadable', source, reason: error.message.split('\n')[0] ?? String(error) });
        else resolve({ kind: 'ok', source, text: stdout });
      });
  });
}

/**
 * The kernel log: `path` when given (a file, or a kmsg-like device), else /dev/kmsg, else
 * `journalctl -k -b`. Never throws; an unreadable source says why.
 */
export async function readKernelLog(path?: string): Promise<KernelLog> {
  const source = path ?? KMSG_PATH;
  try {
    return { kind: 'ok', source, text: readNonBlocking(source) };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    if (path !== undefined) return { kind: 'unreadable', source, reason };
    const fallback = await journalctlKernel();
    if (fallback.kind === 'ok') return fallback;
    return { kind: 'unreadable', source, reason: `${reason}; ${fallback.source}: ${fallback.reason}` };
  }
}
