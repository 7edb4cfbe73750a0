/**
 * `gpugate status`: what NVML reports now: each selected GPU's identity, memory, processes,
 * modes and MIG instances, and the library and driver versions. As a table, `--json`, or `--format prometheus`.
 */

import { readFileSync } from 'node:fs';
import type { GpuDevice, GpuMemory, GpuProcess, NvmlSession, Snapshot } from '../../types';
import { formatBytes } from '../../units';
import { reservedInUsed } from '../../gate/criteria';
import { recoveryRemedy } from '../../nvml/recovery-action';
import type { CommandContext } from '../command-context';
import { parseSessionSettings, type SessionSettings } from '../criteria-settings';
import { ExitCode, exitCodeName } from '../exit-codes';
import { shortBusId } from '../bus-id';
import { memoryImplausibleReason, statusProblems } from '../status-problems';
import { commandDocument } from '../json-envelope';
import { closeSession, openSession } from '../nvml-session';
import { lastKnownUuids, withPrometheusFailure, writeExposition } from '../prometheus-output';
import { prometheusText } from '../prometheus-text';
import { readSelectedSnapshot } from '../selected-snapshot';
import { escapeForTerminal } from '../terminal-text';
import { terminalWidth, wrapLine } from '../terminal-style';
import { textTableBlocks } from '../text-table';

/**
 * A device as `--json` prints it: its memory also says whether used includes reserved (see
 * GpuEvaluation.reservedInUsed) and, when its figures do not add up, why (`implausible`).
 */
type StatusJsonDevice = Omit<GpuDevice, 'memory'> & { memory: (GpuMemory & { reservedInUsed: boolean | null; implausible: string | null }) | null };

function statusJsonDevice(device: GpuDevice): StatusJsonDevice {
  const memory = device.memory;
  return { ...device, memory: memory === null ? null : { ...memory, reservedInUsed: reservedInUsed(memory), implausible: memoryImplausibleReason(device) } };
}

/** Run `gpugate status`. */
export async function runStatus(context: CommandContext): Promise<number> {
  const settings = parseSessionSettings('status', context.values);
  return withPrometheusFailure(settings, context, () => status(context, settings));
}

async function status(context: CommandContext, settings: SessionSettings): Promise<number> {
  let session: NvmlSession | null = null;
  try {
    session = await openSession(settings.libraryPath, settings.callTimeoutMs);
    const read = await readSelectedSnapshot(session, settings, context);
    const selection = read.selection;
    const snapshot: Snapshot = { takenAt: read.snapshot.takenAt, devices: read.devices };
    const library = session.library;
    // Every GPU is shown; a lost one, or figures that do not add up, still end the command with 69.
    const problems = statusProblems(snapshot.devices);
    const exitCode = problems.length === 0 ? ExitCode.ok : ExitCode.unavailable;
    if (settings.format === 'prometheus') {
      writeExposition(settings, context, prometheusText({
        devices: snapshot.devices,
        library,
        timestampSeconds: snapshot.takenAt / 1000,
        lastKnownUuids: lastKnownUuids(settings),
      }));
    } else if (settings.format === 'json') {
      context.stdout.write(commandDocument({ command: 'status', result: exitCode === ExitCode.ok ? 'ok' : 'unavailable', exitCode }, {
        takenAt: snapshot.takenAt,
        selection: { source: selection.source, warnings: selection.warnings },
        library: { path: library.path, driverVersion: library.driverVersion, nvmlVersion: library.nvmlVersion, cudaDriverVersion: library.cudaDriverVersion },
        devices: snapshot.devices.map(statusJsonDevice),
        problems,
      }));
    } else {
      context.stdout.write(statusTable(snapshot, library, selection.source, terminalWidth(context.stdout, context.env)));
    }
    for (const problem of problems) context.logger.error(`${problem.message} (${problem.code})`);
    if (problems.length > 0) context.logger.error(`${problems.length} of ${snapshot.devices.length} selected GPU(s) cannot be used (exit ${exitCode}/${exitCodeName(exitCode)})`);
    return exitCode;
  } finally {
    await closeSession(session);
  }
}

function onOff(value: boolean | null): string {
  return value === null ? '-' : value ? 'on' : 'off';
}

function processName(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
}

/** Columns that leave the table for a line under their GPU when it is too wide, the least needed first. */
const FOLDED_FIRST = ['POWER', 'TEMP', 'UTIL', 'MIG', 'COMPUTE', 'PERSIST', 'RESERVED'];
const STATUS_COLUMNS = ['GPU', 'NAME', 'BUS', 'USED', 'FREE', 'RESERVED', 'TOTAL', 'PROCS', 'PERSIST', 'COMPUTE', 'MIG', 'UTIL', 'TEMP', 'POWER'];

/** The human table: one line per GPU, its processes indented below it, fitted to `width`. */
export function statusTable(snapshot: Snapshot, library: NvmlSession['library'], source: string, width = 80): string {
  const header = [
    escapeForTerminal(`NVML ${library.nvmlVersion ?? '?'}  driver ${library.driverVersion ?? '?'}  CUDA ${library.cudaDriverVersion ?? '?'}  library ${library.path}`),
    `${snapshot.devices.length} GPU(s) selected (${source === 'option' ? '--gpus' : source})`,
  ].map((line) => wrapLine(line, width)).join('\n');
  const rows: string[][] = [STATUS_COLUMNS];
  const details: Map<number, string[]> = new Map();
  for (const device of snapshot.devices) rows.push(deviceRow(device, details));
  const blocks = textTableBlocks(rows, {
    width,
    wrap: [STATUS_COLUMNS.indexOf('NAME')],
    fold: FOLDED_FIRST.map((name) => STATUS_COLUMNS.indexOf(name)),
  });
  const out: string[] = [blocks[0] as string];
  snapshot.devices.forEach((device, i) => {
    out.push(blocks[i + 1] as string);
    out.push(...(details.get(device.index) ?? []).map((line) => wrapLine(line, width, `${/^ */.exec(line)?.[0] ?? ''}  `)));
  });
  return `${header}\n\n${out.join('\n')}\n`;
}

function processLine(process: GpuProcess): string {
  return `pid ${process.pid} ${processName(process.pid)} ${process.usedBytes === null ? 'n/a' : formatBytes(process.usedBytes)} ${process.kinds.join('+')}`;
}

function deviceRow(device: GpuDevice, details: Map<number, string[]>): string[] {
  const memory = device.memory;
  const lines = [`    ${device.uuid ?? 'UUID unknown'}`];
  if (device.error !== null) lines.push(`    error: ${device.error.code}: ${device.error.message}`);
  const implausible = memoryImplausibleReason(device);
  if (implausible !== null) lines.push(`    memory figures implausible: ${implausible}; gpugate cannot judge this GPU (a gate exits 69)`);
  if (device.recoveryAction !== null && device.recoveryAction !== 'none') {
    lines.push(`    recovery action: ${device.recoveryAction} (${recoveryRemedy(device.recoveryAction, device.index)})`);
  }
  for (const [field, error] of Object.entries(device.fieldErrors)) lines.push(`    ${field}: ${error.code}`);
  const processes = device.processes;
  if (Array.isArray(processes)) lines.push(...processes.map((process) => `    ${processLine(process)}`));
  // MIG instances, each with its memory and its processes (GPU instance / compute instance ids).
  for (const mig of device.migDevices ?? []) {
    const memoryText = mig.memory === null ? 'memory n/a' : `used ${formatBytes(mig.memory.usedBytes)} free ${formatBytes(mig.memory.freeBytes)} of ${formatBytes(mig.memory.totalBytes)}`;
    lines.push(`    MIG ${mig.index} ${mig.uuid} gi ${mig.gpuInstanceId ?? '-'} ci ${mig.computeInstanceId ?? '-'} ${memoryText}${mig.error === null ? '' : ` error: ${mig.error.code}`}`);
    lines.push(...(mig.processes ?? []).map((process) => `      ${processLine(process)}`));
  }
  details.set(device.index, lines.map(escapeForTerminal));
  return [
    String(device.index),
    device.name ?? 'unknown',
    device.pciBusId === null ? '-' : shortBusId(device.pciBusId),
    memory === null ? '-' : formatBytes(memory.usedBytes),
    memory === null ? '-' : formatBytes(memory.freeBytes),
    memory === null || memory.reservedBytes === null ? '-' : formatBytes(memory.reservedBytes),
    memory === null ? '-' : formatBytes(memory.totalBytes),
    Array.isArray(processes) ? String(processes.length) : '?',
    onOff(device.persistenceMode),
    device.computeMode ?? '-',
    onOff(device.migMode),
    device.utilization === null ? '-' : `${device.utilization.gpuPercent}%`,
    device.temperatureC === null ? '-' : `${device.temperatureC}C`,
    device.powerWatts === null ? '-' : `${Math.round(device.powerWatts)}W`,
  ];
}
