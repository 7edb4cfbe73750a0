/**
 * The kernel-log checks of `gpugate doctor`: the NVIDIA driver's `NVRM: Xid` messages of this
 * boot (from /dev/kmsg, `journalctl -k -b`, or a saved log the caller names), one check per Xid
 * number, rated and explained from the Xid table, with the GPUs it named.
 */
import type { KernelLog } from '../host/kernel-log';
import type { GpuDevice } from '../types';
import type { DoctorCheck, DoctorStatus } from './doctor-check';
import { busIdOfXidAddress, explainXid, parseXidLines, type XidEvent } from './xid-table';

const SUBJECT = 'kernel log';
/** Lines kept as evidence per Xid (the latest ones). */
const LINES_KEPT = 5;

/** The kernel-log checks of `log`; `devices` map the PCI addresses in Xid lines to NVML indices. */
export function kernelLogChecks(log: KernelLog, devices: readonly GpuDevice[]): DoctorCheck[] {
  if (log.kind === 'unreadable') {
    return [{
      id: 'kernel.log', subject: SUBJECT, status: 'warn', summary: `the kernel log could not be read (${log.source}): Xid errors cannot be checked`,
      evidence: { source: log.source, reason: log.reason },
      advice: 'run as root (reading /dev/kmsg needs CAP_SYSLOG, or kernel.dmesg_restrict=0), or save `journalctl -k -b` to a file and pass it with --kernel-log FILE',
    }];
  }
  const events = parseXidLines(log.text);
  if (events.length === 0) {
    return [{ id: 'kernel.xid', subject: SUBJECT, status: 'pass', summary: `no NVRM Xid messages (${log.source})`, evidence: { source: log.source, xids: 0 } }];
  }
  const byXid = new Map<number, XidEvent[]>();
  for (const event of events) byXid.set(event.xid, [...(byXid.get(event.xid) ?? []), event]);
  const gpuOf = new Map(devices.flatMap((d) => (d.pciBusId === null ? [] : [[d.pciBusId.toUpperCase(), d.index] as const])));
  return [...byXid.entries()].sort(([a], [b]) => a - b).map(([xid, list]) => {
    const explanation = explainXid(xid);
    const status: DoctorStatus = explanation?.status ?? 'warn';
    const addresses = [...new Set(list.map((e) => e.pciAddress))];
    const gpus = addresses.map((address) => ({ pciAddress: address, gpu: gpuOf.get(busIdOfXidAddress(address)) ?? null }));
    const where = gpus.map((g) => (g.gpu === null ? `PCI ${g.pciAddress}` : `GPU ${g.gpu}`)).join(', ');
    const last = list[list.length - 1] as XidEvent;
    return {
      id: `kernel.xid-${xid}`, subject: SUBJECT, status,
      summary: `Xid ${xid} (${explanation?.meaning ?? 'not in gpugate\'s table'}) logged ${list.length} time(s) on ${where}`,
      evidence: {
        source: log.source, xid, count: list.length, gpus,
        lastUptimeSeconds: last.uptimeSeconds, lastDetail: last.detail,
        lines: list.slice(-LINES_KEPT).map((e) => e.line),
      },
      advice: explanation?.advice ?? 'look the number up in NVIDIA\'s Xid catalogue (docs.nvidia.com/deploy/xid-errors)',
    };
  });
}
