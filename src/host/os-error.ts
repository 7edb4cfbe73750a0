/**
 * Which errors mean "the OS refused or could not read" (/proc, cgroupfs, /dev/shm): an errno
 * error from a system call with one of these codes.
 */

const OS_ERRNO_CODES: ReadonlySet<string> = new Set(['EACCES', 'EPERM', 'ENOENT', 'EIO', 'ENOTDIR', 'ELOOP', 'EMFILE', 'ENFILE', 'ENOMEM']);

/** True for an errno error of a system call that the OS refused or could not complete. */
export function isOsError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const e = error as { code?: unknown; syscall?: unknown };
  return typeof e.syscall === 'string' && typeof e.code === 'string' && OS_ERRNO_CODES.has(e.code);
}
