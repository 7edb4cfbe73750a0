/**
 * Finds NVML helper processes (`gpugate-nvml-helper`) that sleep uninterruptibly in the kernel
 * (state D), with what their command line says they are doing: the helper rewrites it to
 * `gpugate-nvml-helper idle` or `gpugate-nvml-helper in <nvmlFunction> gpu <index|-> since <unixMs>`.
 * A helper is recognised by /proc/PID/exe naming exactly the helper's file: no name or command
 * line another program could copy. Reads only; what the findings mean is the caller's policy.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { failureOf, parseArgv, parseChildren, parseStat, parseStatus, PF_KTHREAD, readProcText } from './procfs';

/** The NVML call a helper's command line says it is in. */
export interface HelperCall {
  /** The NVML function, e.g. 'nvmlDeviceGetMemoryInfo_v2'. */
  fn: string;
  /** The GPU index the call is about; null for a call without a device ('-'). */
  gpu: number | null;
  /** When the call began, CLOCK_REALTIME milliseconds. */
  sinceUnixMs: number;
}

/** What a helper's command line says: between requests, in a call, or text not in the helper's form. */
export type HelperState = { kind: 'idle' } | { kind: 'in'; call: HelperCall } | { kind: 'unknown'; text: string };

/** One helper found in state D. */
export interface StuckNvmlHelper {
  pid: number;
  /** Field 22 of /proc/PID/stat (clock ticks after boot): with the pid, names this process unambiguously. */
  startTimeTicks: number;
  /** The kernel function it sleeps in (/proc/PID/wchan); null when unreadable or '0'. */
  wchan: string | null;
  /** What its command line says; 'unknown' when it could not be read in time. */
  state: HelperState;
  /** Its real uid (/proc/PID/status), or null when unreadable. */
  uid: number | null;
  /** A SIGKILL is pending: its session abandoned it, and it cannot act on the signal until the kernel call returns. */
  killPending: boolean;
  /** /proc/PID/exe ended in " (deleted)": the helper file was replaced (an upgrade) after this process started. */
  fileReplaced: boolean;
}

/** What one scan found. */
export interface StuckHelperScan {
  /** Helpers in state D, by pid. */
  stuck: StuckNvmlHelper[];
  /** Helpers found in another state (idle between requests or running a call normally). */
  running: number;
  /** Entries that could not be read (another user's process seen without privilege, a malformed file). */
  unreadable: number;
}

const HELPER_NAME = 'gpugate-nvml-helper';
const STATE_PATTERN = /^in ([A-Za-z_][A-Za-z0-9_]{0,127}) gpu (-|\d{1,6}) since (\d{1,16})$/;
/** The longest a command line is waited for: reading it takes the process's memory lock, which a stuck process may hold. */
const CMDLINE_READ_LIMIT_MS = 200;
/** SIGKILL (9) in a /proc/PID/status signal mask: bit 8. */
const SIGKILL_BIT = 1n << 8n;

/** Parses the arguments of a helper's /proc/PID/cmdline (one argument or several: either way the words count). */
export function parseHelperState(argv: readonly string[]): HelperState {
  const text = argv.join(' ').trim();
  const words = text.split(' ');
  if (words[0] !== HELPER_NAME) return { kind: 'unknown', text };
  const rest = words.slice(1).join(' ');
  if (rest === 'idle') return { kind: 'idle' };
  const match = STATE_PATTERN.exec(rest);
  if (match === null) return { kind: 'unknown', text };
  const sinceUnixMs = Number(match[3]);
  if (!Number.isSafeInteger(sinceUnixMs)) return { kind: 'unknown', text };
  return { kind: 'in', call: { fn: match[1]!, gpu: match[2] === '-' ? null : Number(match[2]), sinceUnixMs } };
}

/** True when the exe link text names the helper: exactly its path, or that path removed since the process started. */
function exeMatch(linkText: string, helperPath: string): 'same' | 'replaced' | null {
  if (linkText === helperPath) return 'same';
  // The kernel writes the name the running file had, with " (deleted)" once it is unlinked: a
  // helper of an earlier install at this very path (an upgrade replaced the file). Only whoever
  // may write the package's folder can have put a file there, so it is as much ours as the file now.
  if (linkText === `${helperPath} (deleted)`) return 'replaced';
  return null;
}

function hasSignal(mask: string | undefined, bit: bigint): boolean {
  if (mask === undefined || !/^[0-9a-fA-F]{1,32}$/.test(mask)) return false;
  return (BigInt(`0x${mask}`) & bit) !== 0n;
}

/** The command line within a limit: null when it did not come in time or could not be read. */
async function readArgvWithin(file: string, limitMs: number): Promise<string[] | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), limitMs);
    timer.unref();
  });
  const read = readProcText(file).then((result) => (result.kind === 'ok' ? parseArgv(result.text) : null));
  try {
    return await Promise.race([read, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Reads one matched process; null when it vanished (or left state D) meanwhile. */
async function readStuck(dir: string, fileReplaced: boolean): Promise<StuckNvmlHelper | 'running' | 'vanished' | 'unreadable'> {
  const statText = await readProcText(`${dir}/stat`);
  if (statText.kind === 'missing') return 'vanished';
  if (statText.kind !== 'ok') return 'unreadable';
  let stat;
  try {
    stat = parseStat(statText.text);
  } catch {
    return 'unreadable';
  }
  if (stat.state !== 'D') return 'running';
  const [statusText, wchanText, argv] = await Promise.all([
    readProcText(`${dir}/status`),
    readProcText(`${dir}/wchan`),
    readArgvWithin(`${dir}/cmdline`, CMDLINE_READ_LIMIT_MS),
  ]);
  const status = statusText.kind === 'ok' ? parseStatus(statusText.text) : null;
  const uidText = status?.get('Uid')?.split(/\s+/)[0];
  const uid = uidText !== undefined && /^\d+$/.test(uidText) ? Number(uidText) : null;
  const wchan = wchanText.kind === 'ok' ? wchanText.text.trim() : '';
  return {
    pid: stat.pid,
    startTimeTicks: stat.startTimeTicks,
    wchan: wchan === '' || wchan === '0' ? null : wchan,
    state: argv === null ? { kind: 'unknown', text: '' } : parseHelperState(argv),
    uid,
    killPending: hasSignal(status?.get('SigPnd'), SIGKILL_BIT) || hasSignal(status?.get('ShdPnd'), SIGKILL_BIT),
    fileReplaced,
  };
}

/**
 * kthreadd (pid 2) and its children: the kernel's threads (a host with many cores has hundreds),
 * and the kernel's user-mode helpers, never a gpugate helper (whose parent is gpugate, or an init
 * once orphaned). Skipping them spares a readlink that throws for each (no executable), which
 * costs more than the read. Read from one file; empty when pid 2 is not proven to be the kernel's
 * (PF_KTHREAD in its flags: another PID namespace's pid 2 is a process like any other) or the
 * kernel has no `children` file.
 */
function kernelThreadPids(procRoot: string): Set<string> {
  try {
    if ((parseStat(readFileSync(`${procRoot}/2/stat`, 'latin1')).flags & PF_KTHREAD) === 0) return new Set();
    const children = parseChildren(readFileSync(`${procRoot}/2/task/2/children`, 'latin1'));
    return new Set(['2', ...children.map(String)]);
  } catch {
    return new Set();
  }
}

/**
 * Every process whose /proc/PID/exe is `helperPath` and whose state is D. One directory listing
 * and one readlink per process but the kernel's threads (synchronous: neither waits on another
 * process); the few matches are then read in full. A process that exits mid-scan is left out; an
 * entry that cannot be read is counted, never thrown (procRoot itself unreadable counts as one).
 * @param helperPath the absolute path of the helper executable (see src/nvml/helper-path.ts)
 */
export async function findStuckNvmlHelpers(helperPath: string, procRoot = '/proc'): Promise<StuckHelperScan> {
  const scan: StuckHelperScan = { stuck: [], running: 0, unreadable: 0 };
  const matched: Array<{ dir: string; fileReplaced: boolean }> = [];
  let names: string[];
  try {
    names = readdirSync(procRoot);
  } catch {
    // No /proc (a sandbox without it): nothing can be known; the one unreadable entry says so.
    scan.unreadable += 1;
    return scan;
  }
  const kernelThreads = kernelThreadPids(procRoot);
  for (const name of names) {
    if (!/^\d+$/.test(name) || kernelThreads.has(name)) continue;
    // Joined as text, not with path.join: a host lists thousands of processes, and normalising
    // each path cost more than its readlink (names from readdir hold no '/' or '..').
    const dir = `${procRoot}/${name}`;
    let linkText: string;
    try {
      linkText = readlinkSync(`${dir}/exe`);
    } catch (error) {
      // Gone meanwhile, or a kernel thread (no executable): not a helper. Anything else is unknown.
      if (failureOf(error, dir).kind !== 'missing') scan.unreadable += 1;
      continue;
    }
    const match = exeMatch(linkText, helperPath);
    if (match !== null) matched.push({ dir, fileReplaced: match === 'replaced' });
  }
  const found = await Promise.all(matched.map(({ dir, fileReplaced }) => readStuck(dir, fileReplaced)));
  for (const entry of found) {
    if (entry === 'running') scan.running += 1;
    else if (entry === 'unreadable') scan.unreadable += 1;
    else if (entry !== 'vanished') scan.stuck.push(entry);
  }
  scan.stuck.sort((a, b) => a.pid - b.pid);
  return scan;
}
