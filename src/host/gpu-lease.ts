/**
 * Advisory GPU leases: one small record per GPU, `<dir>/<uuid>.lease`, that says which process
 * the GPU is handed to (pid plus its start time, so a reused pid is told apart) and/or for how
 * long (see lease-record.ts for what a record says and how it is judged: durations on the boot
 * clock, holders in the host's PID namespace). `gpugate select` prints and exits, so no lock it
 * holds could outlive it: a lease is a record whose holder is verified through /proc at the
 * moment a selector decides. A MIG instance's record names its whole GPU: a lease on either
 * covers both.
 *
 * Deciding and writing happen under an exclusive flock on `<dir>/.lock` (mode 0600: no other user
 * can open it, so none can hold it), taken without blocking and retried; the kernel drops it when
 * the selector's descriptor closes or its process dies, so a killed selector never wedges the
 * others. Writes are a temporary file linked into place (link never replaces an existing name). A
 * stale record is removed only when the name still refers to the very inode that was read and
 * judged (device and inode compared just before unlink). Every file operation goes through
 * src/host/safe-file.ts.
 */
// libuv opens every file with O_CLOEXEC: a descriptor never leaks into a child.
import { closeSync, constants, fstatSync, openSync, readdirSync, readSync } from 'node:fs';
import * as path from 'node:path';
import { ErrorCode, GpugateError } from '../gpugate-error';
import { ConfigError } from '../config-error';
import { isLeaseRecord, judgeLease, makeLeaseRecord, type LeaseRecord, type LeaseRefusalCode, type LeaseTerms, type NewLease } from './lease-record';
import { createFile, FileSystemError, lockFile, removeFileIfSame } from './safe-file';

/** Environment variable naming the lease directory. */
export const LEASE_DIR_ENV = 'GPUGATE_LEASE_DIR';
/** Where leases live by default: /run is a tmpfs emptied at boot. */
export const DEFAULT_LEASE_DIR = '/run/gpugate/leases';
/** How long a selector waits for another one's decision (each holds the lock for milliseconds). */
export const DEFAULT_LEASE_LOCK_TIMEOUT_MS = 10_000;

const LOCK_FILE = '.lock';
const LEASE_SUFFIX = '.lease';
const RECORD_MAX_BYTES = 4096;
const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

export type { LeaseRecord, LeaseTerms } from './lease-record';

/** A lease file's state as judged now. */
export type LeaseState = 'free' | 'held' | 'stale' | 'foreign';

/** What a selector found for one GPU. */
export interface LeaseStatus {
  uuid: string;
  path: string;
  /** free: no file; stale: a lease whose holder is gone or whose time is up; held: a live lease (or doubt); foreign: a file there that is not a lease (never touched). */
  state: LeaseState;
  /** Why, in words (empty for free). */
  reason: string;
  record: LeaseRecord | null;
  /** (dev, ino) of the file that was judged. */
  identity: { dev: bigint; ino: bigint } | null;
}

/**
 * A lease that cannot be taken: the lock held too long, a holder pid that is gone, a lease the
 * host could never check, an unreadable boot clock. (A lease directory that cannot be used
 * safely is an UnsafePathError or FileSystemError.)
 */
export class GpuLeaseError extends GpugateError {
  override readonly name = 'GpuLeaseError';
  declare readonly code: typeof ErrorCode.leaseLockTimeout | LeaseRefusalCode;
  /** The file or directory involved. */
  readonly path: string;

  constructor(code: typeof ErrorCode.leaseLockTimeout | LeaseRefusalCode, filePath: string, message: string, options?: ErrorOptions) {
    super(code, message, options);
    this.path = filePath;
  }
}

/** A lease this process wrote: the record, and the file (device and inode) it was written as. */
export interface OwnLease {
  record: LeaseRecord;
  identity: { dev: bigint; ino: bigint };
}

/** What releasing one lease did. */
export interface LeaseRelease {
  uuid: string;
  path: string;
  /** removed: this call removed the lease; gone: it was no longer there (released before, or judged stale and replaced by a selector); kept: what is there is not this lease, left untouched. */
  result: 'removed' | 'gone' | 'kept';
  reason: string;
}

/** The lease file name of a UUID: the UUID itself when it is a plain name, else its hex. */
export function leaseFileName(uuid: string): string {
  const stem = SAFE_NAME.test(uuid) ? uuid : `x-${Buffer.from(uuid, 'utf8').toString('hex').slice(0, 190)}`;
  return `${stem}${LEASE_SUFFIX}`;
}

function errnoOf(error: unknown): string {
  return (error as NodeJS.ErrnoException).code ?? 'EIO';
}

/** A directory of GPU leases and the lock that serialises decisions over it. */
export class LeaseDirectory {
  readonly dir: string;
  private readonly procRoot: string;
  private readonly now: () => number;

  constructor(dir: string, options: { procRoot?: string; now?: () => number } = {}) {
    if (typeof dir !== 'string' || dir === '') throw new ConfigError('dir', `lease directory must be a non-empty path, got ${JSON.stringify(dir)}`);
    this.dir = path.resolve(dir);
    this.procRoot = options.procRoot ?? '/proc';
    this.now = options.now ?? Date.now;
  }

  /**
   * Runs `decide` holding the directory's exclusive lock (created with the directory if missing),
   * through src/host/safe-file.ts: the directory and its parents proved safe, the lock file private
   * to gpugate's uid (mode 0600), so no other user can hold it. Throws UnsafePathError or
   * FileSystemError when the directory cannot be used safely.
   */
  async withLock<T>(decide: () => T, timeoutMs: number = DEFAULT_LEASE_LOCK_TIMEOUT_MS): Promise<T> {
    const lockPath = path.join(this.dir, LOCK_FILE);
    const lock = await this.named(() => lockFile(lockPath, { timeoutMs, directories: 'create-all', directoryLabel: 'the lease directory' }));
    if (lock === null) throw new GpuLeaseError(ErrorCode.leaseLockTimeout, lockPath, `another gpugate select has held ${lockPath} for more than ${timeoutMs} ms`);
    try {
      return await this.named(async () => decide());
    } finally {
      lock.release();
    }
  }

  /**
   * Runs `act`, rethrowing an OS failure on a file inside the directory (the lock, a lease) as one
   * of the lease directory: its message names the directory and, when permission was denied,
   * what it must be. (An unsafe path, or a failure on the directory or a parent, names it already.)
   */
  private async named<T>(act: () => Promise<T>): Promise<T> {
    try {
      return await act();
    } catch (error) {
      if (!(error instanceof FileSystemError) || !error.path.startsWith(`${this.dir}/`)) throw error;
      const uid = process.geteuid?.() ?? 0;
      const expected = error.code === ErrorCode.fileAccess
        ? ` (expected: a directory gpugate's uid ${uid} may write, owned by ${uid === 0 ? 'root' : `root or uid ${uid}`}, not writable by other users unless sticky)`
        : '';
      throw new FileSystemError(this.dir, error.errno, error.syscall, `the lease directory ${this.dir} cannot be used: ${error.message}${expected}`, { cause: error });
    }
  }

  /**
   * Removes the leases this process wrote, under the lock: each only while its name still refers
   * to the very file written and that file still holds the very record (a lease another selector
   * wrote after judging this one stale is never removed, nor anything that is not a lease).
   * Releasing what is already gone is harmless. Throws UnsafePathError or FileSystemError when
   * the directory cannot be used safely (then nothing is removed).
   */
  async release(leases: readonly OwnLease[], timeoutMs: number = DEFAULT_LEASE_LOCK_TIMEOUT_MS): Promise<LeaseRelease[]> {
    if (leases.length === 0) return [];
    return this.withLock(() => leases.map((lease) => this.releaseOne(lease)), timeoutMs);
  }

  private releaseOne(lease: OwnLease): LeaseRelease {
    const status = this.inspect(lease.record.uuid);
    const done = (result: LeaseRelease['result'], reason: string): LeaseRelease => ({ uuid: lease.record.uuid, path: status.path, result, reason });
    if (status.state === 'free') return done('gone', 'no lease file: released before, or replaced after its holder was gone');
    const same = status.identity !== null && status.identity.dev === lease.identity.dev && status.identity.ino === lease.identity.ino;
    if (!same || status.record === null || JSON.stringify(status.record) !== JSON.stringify(lease.record)) {
      const what = status.state === 'foreign' ? status.reason : `another lease is there now (${status.reason})`;
      return done('kept', `not the lease this process wrote: ${what}; left untouched`);
    }
    if (!removeFileIfSame(status.path, lease.identity)) return done('kept', `${status.path} changed while it was released; left untouched`);
    return done('removed', 'released');
  }

  /** The lease file of one GPU, judged now. Call under {@link withLock} when acting on it. */
  inspect(uuid: string): LeaseStatus {
    return this.inspectNamed(leaseFileName(uuid), uuid);
  }

  /**
   * The leases on MIG instances of the GPU `gpuUuid` (records naming it as their parent), judged
   * now; a directory that cannot be listed is one foreign status (in doubt, the GPU is taken).
   */
  leasesWithin(gpuUuid: string): LeaseStatus[] {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch (error) {
      const code = errnoOf(error);
      if (code === 'ENOENT') return [];
      return [{ uuid: gpuUuid, path: this.dir, state: 'foreign', reason: `cannot list ${this.dir}: ${code}`, record: null, identity: null }];
    }
    const own = leaseFileName(gpuUuid);
    return names
      .filter((name) => name.endsWith(LEASE_SUFFIX) && !name.startsWith('.') && name !== own)
      .map((name) => this.inspectNamed(name, null))
      .filter((status) => status.record?.parentUuid === gpuUuid);
  }

  /** The file `name` in the directory judged as a lease: for `uuid`, or (null) for whichever UUID the name belongs to. */
  private inspectNamed(name: string, uuid: string | null): LeaseStatus {
    const file = path.join(this.dir, name);
    const status = (state: LeaseState, reason: string, record: LeaseRecord | null = null, identity: LeaseStatus['identity'] = null): LeaseStatus => ({ uuid: uuid ?? record?.uuid ?? '', path: file, state, reason, record, identity });
    let fd: number;
    try {
      fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch (error) {
      const code = errnoOf(error);
      if (code === 'ENOENT') return status('free', '');
      return status('foreign', code === 'ELOOP' ? `${file} is a symbolic link, not a lease` : `cannot read ${file}: ${code}`);
    }
    let text: string;
    let identity: { dev: bigint; ino: bigint };
    try {
      const stat = fstatSync(fd, { bigint: true });
      identity = { dev: stat.dev, ino: stat.ino };
      if (!stat.isFile()) return status('foreign', `${file} is not a regular file`);
      if (stat.size > BigInt(RECORD_MAX_BYTES)) return status('foreign', `${file} is larger than a lease (${stat.size} bytes)`);
      const buffer = Buffer.alloc(RECORD_MAX_BYTES + 1);
      const length = readSync(fd, buffer, 0, buffer.length, 0);
      text = buffer.subarray(0, length).toString('utf8');
    } finally {
      closeSync(fd);
    }
    let record: unknown;
    try {
      record = JSON.parse(text);
    } catch {
      return status('foreign', `${file} does not hold a gpugate lease (not JSON)`, null, identity);
    }
    if (!isLeaseRecord(record) || (uuid === null ? leaseFileName(record.uuid) !== name : record.uuid !== uuid)) {
      return status('foreign', `${file} does not hold a gpugate lease${uuid === null ? ' under its name' : ` for ${uuid}`}`, null, identity);
    }
    const [state, reason] = judgeLease(record, this.procRoot, this.now());
    return status(state, reason, record, identity);
  }

  /**
   * The record a new lease with these terms would hold (a MIG instance's whole GPU in
   * `parentUuid`), with the holder read from /proc now; `createdAt` (epoch ms) is shared by one
   * decision's leases. Throws GpuLeaseError when it may not be written (see makeLeaseRecord).
   */
  recordFor(uuid: string, parentUuid: string | null, terms: LeaseTerms, createdAt: number = this.now()): NewLease {
    const made = makeLeaseRecord(uuid, parentUuid, terms, this.procRoot, createdAt);
    if ('refused' in made) throw new GpuLeaseError(made.refused.code, made.refused.path, made.refused.message);
    return made;
  }

  /**
   * Removes a stale lease, only if its name still refers to the inode that was judged; true
   * when removed (or already gone). Call under {@link withLock}.
   */
  removeStale(status: LeaseStatus): boolean {
    if (status.state !== 'stale' || status.identity === null) return false;
    return removeFileIfSame(status.path, status.identity);
  }

  /**
   * Writes `record` as the GPU's lease unless a file of that name exists: a temporary file
   * written and synced, then linked into place. True when written. Call under {@link withLock}.
   */
  write(record: LeaseRecord): boolean {
    return createFile(path.join(this.dir, leaseFileName(record.uuid)), `${JSON.stringify(record)}\n`, { mode: 0o644 });
  }
}
