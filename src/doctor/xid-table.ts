/**
 * NVIDIA Xid errors: what the common ones mean and what to do, as data, and the parser that finds
 * `NVRM: Xid` lines in a kernel log (the /dev/kmsg record format, `dmesg` and `journalctl -k`).
 * Meanings follow NVIDIA's Xid catalogue; `status` is how `gpugate doctor` rates a GPU that
 * logged one: `warn` for errors that an application usually caused, `fail` for the hardware,
 * the driver's firmware, or a reset the GPU needs before it can be trusted again.
 */
import type { DoctorStatus } from './doctor-check';

/** One Xid's explanation. */
export interface XidExplanation {
  xid: number;
  /** NVIDIA's name for it. */
  meaning: string;
  status: DoctorStatus;
  /** What to do. */
  advice: string;
}

/** The common Xids, by number. */
export const XID_TABLE: readonly XidExplanation[] = [
  { xid: 13, meaning: 'graphics engine exception', status: 'warn',
    advice: 'usually the application (an illegal instruction or out-of-range access); if several applications hit it, run the GPU diagnostics (dcgmi diag -r 3)' },
  { xid: 31, meaning: 'GPU memory page fault', status: 'warn',
    advice: 'usually the application (an illegal memory access); check the process named in the message; repeated faults across applications point at the driver or the GPU' },
  { xid: 43, meaning: 'GPU stopped processing (a channel was reset after an application fault)', status: 'warn',
    advice: 'the faulting application was stopped and the GPU kept working; look at the Xid logged just before it' },
  { xid: 45, meaning: 'preemptive cleanup, due to previous errors', status: 'warn',
    advice: 'a process was stopped (often killed, or after an earlier Xid); on its own it needs no action' },
  { xid: 48, meaning: 'double-bit ECC error', status: 'fail',
    advice: 'an uncorrectable memory error: drain the GPU and reset it (nvidia-smi -r); if it recurs, or row remapping fails, the GPU needs replacing' },
  { xid: 61, meaning: 'internal micro-controller breakpoint or warning', status: 'fail',
    advice: 'the GPU firmware stopped: reset the GPU (or reboot); report it to NVIDIA with nvidia-bug-report.sh if it recurs' },
  { xid: 62, meaning: 'internal micro-controller halt', status: 'fail',
    advice: 'the GPU firmware halted: reset the GPU (or reboot); report it with nvidia-bug-report.sh if it recurs' },
  { xid: 63, meaning: 'ECC page retirement or row remapping recorded', status: 'warn',
    advice: 'a bad memory row was recorded for remapping: it takes effect at the next GPU reset; drain and reset the GPU when convenient' },
  { xid: 64, meaning: 'ECC page retirement or row remapping recording failure', status: 'fail',
    advice: 'the bad memory could not be remapped: drain the GPU; it needs replacing (RMA)' },
  { xid: 74, meaning: 'NVLink error', status: 'fail',
    advice: 'an NVLink connection failed: reset the GPUs on the link (or reboot); check the NVLink bridge or the baseboard if it recurs' },
  { xid: 79, meaning: 'GPU has fallen off the bus', status: 'fail',
    advice: 'the GPU is unreachable: nothing on it works until the host is rebooted (or the GPU reset, if the bus allows); check power, cooling and the PCIe slot' },
  { xid: 94, meaning: 'contained ECC error', status: 'warn',
    advice: 'an uncorrectable memory error was contained: only the application using that memory was stopped; reset the GPU when drained so the row is remapped' },
  { xid: 95, meaning: 'uncontained ECC error', status: 'fail',
    advice: 'an uncorrectable memory error could not be contained: every application on the GPU is affected; drain and reset the GPU' },
  { xid: 119, meaning: 'GSP RPC timeout', status: 'fail',
    advice: 'the GPU System Processor stopped answering the driver: reset the GPU or reboot; a driver update often fixes recurring ones' },
  { xid: 154, meaning: 'GPU recovery action changed', status: 'fail',
    advice: 'the driver says what the GPU needs (the message names it: GPU reset, node reboot, drain and reset); do that before using the GPU again' },
];

const BY_XID = new Map(XID_TABLE.map((entry) => [entry.xid, entry]));

/** The explanation of an Xid, or null for one the table does not hold. */
export function explainXid(xid: number): XidExplanation | null {
  return BY_XID.get(xid) ?? null;
}

/** One `NVRM: Xid` message found in a kernel log. */
export interface XidEvent {
  xid: number;
  /** The PCI address as the driver writes it, e.g. '0000:1b:00'. */
  pciAddress: string;
  /** The driver's text after the number (pid, process name, details). */
  detail: string;
  /** Seconds since boot when the log gave them (kmsg, dmesg, short-monotonic); else null. */
  uptimeSeconds: number | null;
  /** The whole line as logged. */
  line: string;
}

// "NVRM: Xid (PCI:0000:1b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
// The `s` flag: the detail may hold a raw CR, U+2028 or U+2029 (a process name is anyone's to
// choose), which `.` alone would not match, hiding the whole line.
const XID_LINE = /NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\): (\d+),?\s*(.*)$/s;
// /dev/kmsg: "PRIORITY,SEQ,MICROSECONDS,FLAGS;TEXT"
const KMSG_PREFIX = /^\d+,\d+,(\d+),[^;]*;/;
// dmesg and journalctl -o short-monotonic: "[ 1234.567890] "
const UPTIME_PREFIX = /^\s*\[\s*(\d+\.\d+)\]/;

/** Every Xid message in `text`, in log order. Continuation lines of kmsg records (leading space) are skipped. */
export function parseXidLines(text: string): XidEvent[] {
  const events: XidEvent[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/\r$/, '');
    if (line.startsWith(' ')) continue;
    const match = XID_LINE.exec(line);
    if (match === null) continue;
    let uptimeSeconds: number | null = null;
    const kmsg = KMSG_PREFIX.exec(line);
    if (kmsg !== null) uptimeSeconds = Number(kmsg[1]) / 1e6;
    else {
      const uptime = UPTIME_PREFIX.exec(line);
      if (uptime !== null) uptimeSeconds = Number(uptime[1]);
    }
    events.push({
      xid: Number(match[2]),
      pciAddress: (match[1] as string).toLowerCase(),
      detail: (match[3] ?? '').trim(),
      uptimeSeconds,
      line: kmsg !== null ? line.slice(kmsg[0].length) : line.trim(),
    });
  }
  return events;
}

/**
 * The canonical NVML bus id ('00000000:1B:00.0') of a driver PCI address ('0000:1b:00'), so an
 * Xid can be matched to a GPU.
 */
export function busIdOfXidAddress(address: string): string {
  const [domain = '0', bus = '0', rest = '0'] = address.split(':');
  const [device = '0', fn = '0'] = rest.split('.');
  return `${domain.padStart(8, '0')}:${bus.padStart(2, '0')}:${device.padStart(2, '0')}.${fn}`.toUpperCase();
}
