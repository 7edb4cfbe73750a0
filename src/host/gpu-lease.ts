/**
 * Advisory GPU leases: one small record per GPU, `<dir>/<uuid>.lease`, that says which process
 * the GPU is handed to (pid plus its start time, so a reused pid is told apart) and/or until when.
 * `gpugate select` prints and exits, so no lock it holds could outlive it: a lease is a record
 * whose holder is verified through /proc at the moment a selector decides. It is free when its
 * holder has exited (or its pid now names another process), when it has expired, or when it comes
 * from an earlier boot; in every other case, including any doubt (a holder in another PID
 * namespace, an unreadable /proc entry, a file that is not a lease), it is taken.
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
import { closeSync, constants, fstatSync, openSync, readFileSync, readSync, readlinkSync } from 'node:fs';
import * as path from 'node:path';
import { ErrorCode, GpugateError } from '../gpugate-error';
import { parseStat } from './procfs';
import { createFile, lockFile, removeFileIfSame } from './safe-file';

/** Environment variable naming the lease directory. */
export const LEASE_DIR_ENV = 'GPUGATE_LEASE_DIR';
/** Where leases live by default: /run is a tmpfs emptied at boot. */
export const DEFAULT_LEASE_DIR = '/run/gpugate/leases';
/** How long a selector waits for another one's decision (each holds the lock for milliseconds). */
export const DEFAULT_LEASE_LOCK_TIMEOUT_MS = 10_000;

const LOCK_FILE = '.lock';
const LEASE_SUFFIX = '.lease';
const RECORD_KIND = 'gpugate-lease';
const RECORD_MAX_BYTES = 4096;
const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

/** What a lease file holds. */
export interface LeaseRecord {
  kind: typeof RECORD_KIND;
  /** The GPU (or MIG instance) UUID the lease is for. */
  uuid: string;
  /** The process the GPU is handed to; null when only `expiresAt` bounds the lease. */
  holderPid: number | null;
  /** Field 22 of the holder's /proc/PID/stat when leased: a reused pid has another. */
  holderStartTicks: number | null;
  /** The holder's command name when leased (for messages only). */
  holderComm: string | null;
  /** The PID namespace the pid is valid in (`pid:[inode]` of the selector). */
  pidNamespace: string | null;
  /** /proc/sys/kernel/random/boot_id when leased. */
  bootId: string | null;
  /** Epoch milliseconds. */
  createdAt: number;
  /** Epoch milliseconds after which the lease is free; null: until the holder exits. */
  expiresAt: number | null;
  /** The gpugate process that wrote it. */
  selectorPid: number;
}

/** Who a new lease is for. */
export interface LeaseTerms {
  /** The process that will use the GPUs; null for a lease bounded by durationMs alone. */
  holderPid: number | null;
  /** Free the lease this long after it is taken; null: only when the holder exits. */
  durationMs: number | null;
}

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
 * A lease that cannot be taken: GPUGATE_LEASE_LOCK_TIMEOUT, or `ESRCH` for a holder pid that is
 * gone. (A lease directory that cannot be used safely is an UnsafePathError or FileSystemError.)
 */
export class GpuLeaseError extends GpugateError {
  override readonly name = 'GpuLeaseError';
  /** The file or directory involved. */
  readonly path: string;

  constructor(code: string, filePath: string, message: string, options?: ErrorOptions) {
    super(code, message, options);
    this.path = filePath;
  }
}

/** The lease file name of a UUID: the UUID itself when it is a plain name, else its hex. */
export function leaseFileName(uuid: string): string {
  const stem = SAFE_NAME.test(uuid) ? uuid : `x-${Buffer.from(uuid, 'utf8').toString('hex').slice(0, 190)}`;
  return `${stem}${LEASE_SUFFIX}`;
}

function errnoOf(error: unknown): string {
  return (error as NodeJS.ErrnoException).code ?? 'EIO';
}

function readSmall(file: string): string | null {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return null;
  }
}

function pidNamespaceOf(procRoot: string): string | null {
  try {
    return readlinkSync(path.join(procRoot, 'self', 'ns', 'pid'));
  } catch {
    return null;
  }
}

function isLeaseRecord(value: unknown, uuid: string): value is LeaseRecord {
  if (typeof value !== 'object' || value === null) return false;
  const r = value as Record<string, unknown>;
  const intOrNull = (v: unknown): boolean => v === null || (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0);
  const strOrNull = (v: unknown): boolean => v === null || typeof v === 'string';
  return (
    r['kind'] === RECORD_KIND &&
    r['uuid'] === uuid &&
    intOrNull(r['holderPid']) &&
    intOrNull(r['holderStartTicks']) &&
    strOrNull(r['holderComm']) &&
    strOrNull(r['pidNamespace']) &&
    strOrNull(r['bootId']) &&
    typeof r['createdAt'] === 'number' &&
    intOrNull(r['expiresAt']) &&
    typeof r['selectorPid'] === 'number' &&
    (r['holderPid'] !== null || r['expiresAt'] !== null)
  );
}

/** The process a lease names, read now: its start ticks and command name, or why it is not there. */
type HolderProbe = { kind: 'running'; startTicks: number; comm: string } | { kind: 'exited'; why: string } | { kind: 'unknown'; why: string };

function probeHolder(pid: number, procRoot: string): HolderProbe {
  let text: string;
  try {
    text = readFileSync(path.join(procRoot, String(pid), 'stat'), 'utf8');
  } catch (error) {
    const code = errnoOf(error);
    if (code === 'ENOENT' || code === 'ESRCH') return { kind: 'exited', why: `holder pid ${pid} has exited` };
    return { kind: 'unknown', why: `cannot read ${path.join(procRoot, String(pid), 'stat')}: ${code}` };
  }
  try {
    const stat = parseStat(text);
    // A zombie has finished; only its parent's wait() is missing. Its GPUs are no longer used.
    if (stat.state === 'Z' || stat.state === 'X') return { kind: 'exited', why: `holder pid ${pid} has exited (state ${stat.state})` };
    return { kind: 'running', startTicks: stat.startTimeTicks, comm: stat.comm };
  } catch (error) {
    return { kind: 'unknown', why: (error as Error).message };
  }
}

/** A directory of GPU leases and the lock that serialises decisions over it. */
export class LeaseDirectory {
  readonly dir: string;
  private readonly procRoot: string;
  private readonly now: () => number;

  constructor(dir: string, options: { procRoot?: string; now?: () => number } = {}) {
    if (typeof dir !== 'string' || dir === '') throw new TypeError(`lease directory must be a non-empty path, got ${JSON.stringify(dir)}`);
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
    const lock = await lockFile(lockPath, { timeoutMs, directories: 'create-all', directoryLabel: 'the lease directory' });
    if (lock === null) throw new GpuLeaseError(ErrorCode.leaseLockTimeout, lockPath, `another gpugate select has held ${lockPath} for more than ${timeoutMs} ms`);
    try {
      return decide();
    } finally {
      lock.release();
    }
  }

  /** The lease file of one GPU, judged now. Call under {@link withLock} when acting on it. */
  inspect(uuid: string): LeaseStatus {
    const file = path.join(this.dir, leaseFileName(uuid));
    const status = (state: LeaseState, reason: string, record: LeaseRecord | null = null, identity: LeaseStatus['identity'] = null): LeaseStatus => ({ uuid, path: file, state, reason, record, identity });
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
    if (!isLeaseRecord(record, uuid)) return status('foreign', `${file} does not hold a gpugate lease for ${uuid}`, null, identity);
    const [state, reason] = this.judge(record);
    return status(state, reason, record, identity);
  }

  private judge(record: LeaseRecord): ['held' | 'stale', string] {
    const now = this.now();
    if (record.expiresAt !== null && now >= record.expiresAt) return ['stale', `expired at ${new Date(record.expiresAt).toISOString()}`];
    const currentBoot = readSmall(path.join(this.procRoot, 'sys', 'kernel', 'random', 'boot_id'));
    if (record.bootId !== null && currentBoot !== null && record.bootId !== currentBoot) return ['stale', 'taken before the last boot'];
    const until = record.expiresAt === null ? '' : ` until ${new Date(record.expiresAt).toISOString()}`;
    if (record.holderPid === null) return ['held', `leased${until}`];
    const who = `pid ${record.holderPid}${record.holderComm === null ? '' : ` (${record.holderComm})`}`;
    const ownNamespace = pidNamespaceOf(this.procRoot);
    if (record.pidNamespace === null || ownNamespace === null || record.pidNamespace !== ownNamespace) {
      return ['held', `leased to ${who} in PID namespace ${record.pidNamespace ?? 'unknown'}, which cannot be checked from ${ownNamespace ?? 'an unknown one'}${until}`];
    }
    const probe = probeHolder(record.holderPid, this.procRoot);
    if (probe.kind === 'exited') return ['stale', probe.why];
    if (probe.kind === 'unknown') return ['held', `leased to ${who}; ${probe.why}, so it counts as alive${until}`];
    if (record.holderStartTicks === null || probe.startTicks !== record.holderStartTicks) {
      return ['stale', `holder pid ${record.holderPid} has exited (the pid now names another process, started at tick ${probe.startTicks}, not ${record.holderStartTicks ?? 'unknown'})`];
    }
    return ['held', `leased to ${who}${until}`];
  }

  /** The record a new lease with these terms would hold, with the holder read from /proc now; `createdAt` (epoch ms) is shared by one decision's leases. */
  recordFor(uuid: string, terms: LeaseTerms, createdAt: number = this.now()): LeaseRecord {
    let holderStartTicks: number | null = null;
    let holderComm: string | null = null;
    if (terms.holderPid !== null) {
      const probe = probeHolder(terms.holderPid, this.procRoot);
      if (probe.kind !== 'running') {
        throw new GpuLeaseError('ESRCH', path.join(this.procRoot, String(terms.holderPid)), `cannot lease to pid ${terms.holderPid}: ${probe.why}`);
      }
      holderStartTicks = probe.startTicks;
      holderComm = probe.comm;
    }
    return {
      kind: RECORD_KIND,
      uuid,
      holderPid: terms.holderPid,
      holderStartTicks,
      holderComm,
      pidNamespace: pidNamespaceOf(this.procRoot),
      bootId: readSmall(path.join(this.procRoot, 'sys', 'kernel', 'random', 'boot_id')),
      createdAt,
      expiresAt: terms.durationMs === null ? null : createdAt + terms.durationMs,
      selectorPid: process.pid,
    };
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
