/**
 * Stale GPU-context detection: classifies every process NVML lists on the selected GPUs into one
 * of the holder classes (holder-classes.ts), finds memory no listed process accounts for, hidden
 * holders (/dev/nvidiaN open or mapped but not listed), and leaked /dev/shm segments. All of it is
 * read from procfs under configurable roots; nothing here signals or removes anything.
 */
import { ConfigError } from '../config-error';
import type { GpuDevice, Snapshot } from '../types';
import { scanOpenFiles, type OpenFiles } from '../host/proc-open-files';
import { readProcess } from '../host/procfs';
import { ownerOf } from '../host/process-owner';
import { checkOptionKeys } from '../option-keys';
import { classifyHolder } from './classify-holder';
import { DEFAULT_STABLE_TOLERANCE_BYTES, usedExcludingReserved } from './criteria';
import type { GpuHolderSummary, HiddenHolder, HolderReport, InspectScans, UnitProcess } from './holder-report';
import { INSPECT_OPTION_CHECKS, prepareInspectContext, type InspectContext, type InspectOptions, type ScanWhen } from './inspect-context';
import { sharedInspectContext } from './inspect-context-cache';
import { listedProcesses } from './listed-processes';
import { unitCgroupMembers } from './unit-cgroup';

// The public entry of holder inspection: its parts' names stay importable from here.
export { HOLDER_CLASSES, type HolderClass } from './holder-classes';
export type { Activation } from './activation';
export { classifyHolder } from './classify-holder';
export { isEngineCommand } from './engine-command';
export type { GpuHolderSummary, GpuUsage, HiddenHolder, Holder, HolderReport, InspectScans, UnitProcess } from './holder-report';
export { INSPECT_OPTION_CHECKS, prepareInspectContext, type InspectContext, type InspectOptions, type ScanWhen } from './inspect-context';
export { listedProcesses, usedBytesOn, type ListedProcess } from './listed-processes';
export { inCgroup, unitCgroupFromPath, unitCgroupMembers } from './unit-cgroup';
export { ancestorsOf } from '../host/process-ancestors';

/** Memory the listed processes may leave unexplained without a search for holders NVML does not list (the stability tolerance). */
export const UNEXPLAINED_TOLERANCE_BYTES = DEFAULT_STABLE_TOLERANCE_BYTES;

/** used (v2, reserved not counted) minus the listed processes' memory, at least 0; null when not computable. */
export function unattributedBytesOf(memory: GpuDevice['memory'], processes: GpuDevice['processes']): number | null {
  if (!memory || memory.source !== 'v2' || !processes) return null;
  let listed = 0;
  for (const proc of processes) {
    if (proc.usedBytes === null) return null;
    listed += proc.usedBytes;
  }
  return Math.max(0, usedExcludingReserved(memory) - listed);
}

/** What a hidden holder is called and who owns it. */
type HiddenName = Pick<HiddenHolder, 'comm' | 'cmdline' | 'owner'>;

function hiddenHoldersOf(device: GpuDevice, openFiles: OpenFiles[], names: Map<number, HiddenName>, ctx: InspectContext): HiddenHolder[] {
  if (device.minorNumber === null) return [];
  const node = `/dev/nvidia${device.minorNumber}`;
  const listed = new Set((device.processes ?? []).map((p) => p.pid));
  const hidden: HiddenHolder[] = [];
  for (const entry of openFiles) {
    if (listed.has(entry.pid) || entry.pid === ctx.selfPid) continue;
    const via: Array<'fd' | 'maps'> = [];
    if (entry.fdTargets?.includes(node)) via.push('fd');
    if (entry.mappedPaths?.some((p) => p === node || p === `${node} (deleted)`)) via.push('maps');
    if (via.length === 0) continue;
    const name = names.get(entry.pid) ?? { comm: null, cmdline: null, owner: null };
    hidden.push({ pid: entry.pid, comm: name.comm, cmdline: name.cmdline, owner: name.owner, via });
  }
  return hidden;
}

/**
 * Classifies every process NVML lists on the selected GPUs (the snapshot must include process
 * lists), computes per GPU the memory no listed process accounts for and the hidden holders, and
 * lists leaked /dev/shm segments with the tmpfs free space.
 */
export async function inspectHolders(snapshot: Snapshot, options: InspectOptions = {}): Promise<HolderReport> {
  checkOptionKeys<InspectOptions>('inspectHolders(options)', options, INSPECT_OPTION_CHECKS, '{ procRoot, devices }');
  for (const name of ['scanHidden', 'scanShm'] as const) {
    const when: unknown = options[name];
    if (when !== undefined && typeof when !== 'boolean' && when !== 'unexplained') {
      throw new ConfigError(name, `option ${name} must be true, false or 'unexplained', got ${typeof when === 'string' ? JSON.stringify(when) : String(when)}`);
    }
  }
  const shared = options.context !== undefined
    ? { context: options.context, source: 'given' as const }
    : await sharedInspectContext(options, () => prepareInspectContext(options));
  const ctx = shared.context;
  const wanted = options.devices;
  const devices = snapshot.devices.filter((d) => wanted === undefined || wanted.includes(d.index));
  const holders = await Promise.all(listedProcesses(devices).map((listed) => classifyHolder(listed, snapshot.takenAt, ctx)));

  const unexplainedGpus = devices.filter((device) => !memoryExplained(device)).map((device) => device.index);
  const runs = (when: ScanWhen): boolean => (when === 'unexplained' ? unexplainedGpus.length > 0 : when);
  const scanHidden = runs(options.scanHidden ?? 'unexplained');
  // The /dev/shm code loads only for a scan that runs (import(), see gate.ts's staleScan).
  const shmModule = await import('../host/shm.js');
  const patterns = options.shmPatterns ?? [...shmModule.DEFAULT_SHM_PATTERNS];
  const scanShm = patterns.length > 0 && runs(options.scanShm ?? 'unexplained');
  // The shm search reads open files itself, and only when a file matches: read them here only for hidden holders.
  const openFiles = scanHidden ? await scanOpenFiles(ctx.procRoot).catch(() => [] as OpenFiles[]) : [];

  const names = new Map<number, HiddenName>();
  if (scanHidden) {
    const nodes = new Set(devices.filter((d) => d.minorNumber !== null).map((d) => `/dev/nvidia${d.minorNumber}`));
    const interesting = openFiles.filter((e) => [...(e.fdTargets ?? []), ...(e.mappedPaths ?? [])].some((t) => nodes.has(t.replace(/ \(deleted\)$/, ''))));
    await Promise.all(
      interesting.map(async (e) => {
        const info = await readProcess(e.pid, ctx.procRoot);
        names.set(e.pid, info.kind === 'ok'
          ? { comm: info.comm, cmdline: info.cmdline, owner: ownerOf(info, { userNames: ctx.userNames, bootTimeMs: ctx.bootTimeMs, atMs: snapshot.takenAt }) }
          : { comm: null, cmdline: null, owner: null });
      }),
    );
  }
  const perGpu: GpuHolderSummary[] = devices.map((device) => ({
    index: device.index,
    unattributedBytes: unattributedBytesOf(device.memory, device.processes),
    hiddenHolders: scanHidden ? hiddenHoldersOf(device, openFiles, names, ctx) : [],
  }));

  let shm: HolderReport['shm'] = { leaked: [], tmpfsFreeBytes: null, tmpfsTotalBytes: null };
  let openFilesRead = scanHidden;
  if (scanShm) {
    const found = await shmModule.findLeakedShm({ shmRoot: options.shmRoot ?? '/dev/shm', procRoot: ctx.procRoot, patterns, ...(scanHidden ? { openFiles } : {}) });
    shm = { leaked: found.leaked, tmpfsFreeBytes: found.tmpfsFreeBytes, tmpfsTotalBytes: found.tmpfsTotalBytes };
    openFilesRead ||= found.openFilesRead;
  }
  const unitProcesses: UnitProcess[] = [];
  if (ctx.unitCgroup !== null) {
    const listed = new Set(holders.map((h) => h.pid));
    for (const pid of await unitCgroupMembers(ctx.unitCgroup, ctx.procRoot, options.cgroupRoot ?? '/sys/fs/cgroup')) {
      if (ctx.protectedPids.has(pid)) continue;
      const info = await readProcess(pid, ctx.procRoot);
      if (info.kind === 'missing') continue;
      unitProcesses.push({
        pid,
        comm: info.kind === 'ok' ? info.comm : null,
        cmdline: info.kind === 'ok' ? info.cmdline : null,
        state: info.kind === 'ok' ? info.stat.state : null,
        listed: listed.has(pid),
      });
    }
  }
  const scans: InspectScans = { unexplainedGpus, hiddenHolders: scanHidden, shm: scanShm, openFiles: openFilesRead, context: shared.source };
  return { holders, perGpu, shm, unitCgroup: ctx.unitCgroup, nestedPidNamespace: ctx.nestedPidNamespace, unitProcesses, scans };
}

/** Whether the listed processes account for a GPU's used memory within UNEXPLAINED_TOLERANCE_BYTES. */
function memoryExplained(device: GpuDevice): boolean {
  const unattributed = unattributedBytesOf(device.memory, device.processes);
  return unattributed !== null && unattributed <= UNEXPLAINED_TOLERANCE_BYTES;
}
