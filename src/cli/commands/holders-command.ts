/**
 * `gpugate holders`: who holds each selected GPU, classified (the classes: gate/holder-classes.ts),
 * the memory no listed process accounts for, hidden holders (/dev/nvidia* open or mapped but not
 * listed), and leaked /dev/shm files.
 */

import type { NvmlSession } from '../../types';
import { formatBytes } from '../../units';
import type { CommandContext } from '../command-context';
import { parseSessionSettings, type SessionSettings } from '../criteria-settings';
import { ExitCode, exitCodeName } from '../exit-codes';
import { holderName } from '../../gate/failure-text';
import { isStaleHolder } from '../../gate/stale-holders';
import { usedBytesOn } from '../../gate/stale';
import { shortBusId } from '../bus-id';
import { shortCommand } from '../holder-text';
import { describeOwner } from '../../gate/owner-text';
import { holderMemoryUnknownReason, holdersUnknownReason } from '../../gate/holders-unknown';
import { commandDocument } from '../json-envelope';
import { holderJson, holderOnGpuJson, ownerJson } from '../json-result';
import { logEvent } from '../logfmt';
import { closeSession, openSession } from '../nvml-session';
import { lastKnownUuids, withPrometheusFailure, writeExposition } from '../prometheus-output';
import { prometheusText } from '../prometheus-text';
import { readSelectedSnapshot } from '../selected-snapshot';
import { statusProblems } from '../status-problems';
import { escapeForTerminal } from '../terminal-text';
import { terminalWidth, wrapLine } from '../terminal-style';
import { textTable } from '../text-table';

/** Run `gpugate holders`. */
/** A byte count for the table; n/a when NVML did not say. */
function bytesOrNa(bytes: number | null): string {
  return bytes === null ? 'n/a' : formatBytes(bytes);
}

const HOLDER_COLUMNS = ['GPU', 'PID', 'CLASS', 'USED', 'STATE', 'PPID', 'NAME', 'OWNER', 'COMMAND', 'WHY'];
/** Columns that leave the table for a line under their holder when it is too wide, the least needed first. */
const FOLDED_FIRST = ['COMMAND', 'OWNER', 'PPID', 'STATE', 'WHY'];

export async function runHolders(context: CommandContext): Promise<number> {
  const settings = parseSessionSettings('holders', context.values);
  return withPrometheusFailure(settings, context, () => holders(context, settings));
}

async function holders(context: CommandContext, settings: SessionSettings): Promise<number> {
  const { logger } = context;
  let session: NvmlSession | null = null;
  try {
    session = await openSession(settings.libraryPath, settings.callTimeoutMs);
    const { snapshot, selection, devices } = await readSelectedSnapshot(session, settings, context);
    const { inspectHolders } = require('../../gate/stale') as typeof import('../../gate/stale');
    // A command run to look: it searches everything, whatever the memory figures say.
    const report = await inspectHolders(snapshot, { devices: selection.indices, scanHidden: true, scanShm: true });
    const unattributed = new Map(report.perGpu.map((entry) => [entry.index, entry.unattributedBytes]));
    // As status: every GPU is listed, but a lost one or impossible memory figures end the command
    // with 69 (its holders cannot be known), each named on stderr after the output.
    const problems = statusProblems(devices);
    const exitCode = problems.length === 0 ? ExitCode.ok : ExitCode.unavailable;
    const finish = (): number => {
      for (const problem of problems) logger.error(`${problem.message} (${problem.code})`);
      if (problems.length > 0) logger.error(`${problems.length} of ${devices.length} selected GPU(s) cannot be used (exit ${exitCode}/${exitCodeName(exitCode)})`);
      return exitCode;
    };
    for (const holder of report.holders) {
      if (isStaleHolder(holder)) {
        logger.warning(logEvent('stale', [['gpu', holder.gpus.join(',')], ['pid', holder.pid], ['class', holder.class], ['name', holderName(holder)], ['owner', describeOwner(holder.owner)], ['reason', holder.reason]]));
      }
    }
    if (settings.format === 'prometheus') {
      writeExposition(settings, context, prometheusText({
        devices,
        lastKnownUuids: lastKnownUuids(settings),
        library: session.library,
        holders: report.holders,
        unattributedBytes: unattributed,
        shm: report.shm,
        timestampSeconds: snapshot.takenAt / 1000,
      }));
      return finish();
    }
    if (settings.format === 'json') {
      context.stdout.write(commandDocument({ command: 'holders', result: exitCode === ExitCode.ok ? 'ok' : 'unavailable', exitCode }, {
        takenAt: snapshot.takenAt,
        selection: { source: selection.source, warnings: selection.warnings },
        unitCgroup: report.unitCgroup,
        nestedPidNamespace: report.nestedPidNamespace,
        gpus: devices.map((device) => {
          const summary = report.perGpu.find((entry) => entry.index === device.index);
          return {
            index: device.index,
            uuid: device.uuid,
            pciBusId: device.pciBusId,
            name: device.name,
            totalBytes: device.memory?.totalBytes ?? null,
            usedBytes: device.memory?.usedBytes ?? null,
            reservedBytes: device.memory?.reservedBytes ?? null,
            freeBytes: device.memory?.freeBytes ?? null,
            holders: report.holders.filter((holder) => holder.gpus.includes(device.index)).map((holder) => holderOnGpuJson(holder, device.index)),
            holdersUnknown: holdersUnknownReason(device.processes, device.fieldErrors.processes),
            holderMemoryUnknown: holderMemoryUnknownReason(device.processes),
            unattributedBytes: summary?.unattributedBytes ?? null,
            hiddenHolders: (summary?.hiddenHolders ?? []).map((hidden) => ({ pid: hidden.pid, comm: hidden.comm, cmdline: hidden.cmdline, owner: ownerJson(hidden.owner), via: hidden.via })),
          };
        }),
        stale: {
          holders: report.holders.filter((holder) => isStaleHolder(holder)).map(holderJson),
          shm: report.shm,
        },
        problems,
      }));
      return finish();
    }
    const width = terminalWidth(context.stdout, context.env);
    const rows: string[][] = [HOLDER_COLUMNS];
    for (const device of devices) {
      const summary = report.perGpu.find((entry) => entry.index === device.index);
      const listed = report.holders.filter((holder) => holder.gpus.includes(device.index));
      for (const holder of listed) {
        rows.push([
          String(device.index),
          String(holder.pid),
          holder.class,
          bytesOrNa(usedBytesOn(holder, device.index)),
          holder.state ?? '-',
          holder.ppid === null ? '-' : String(holder.ppid),
          holderName(holder),
          describeOwner(holder.owner) ?? '-',
          shortCommand(holder.owner?.argv) ?? '-',
          holder.reason,
        ]);
      }
      for (const hidden of summary?.hiddenHolders ?? []) {
        rows.push([String(device.index), String(hidden.pid), 'hidden', '?', '-', '-', hidden.comm ?? '?', describeOwner(hidden.owner) ?? '-', shortCommand(hidden.owner?.argv) ?? '-', `has /dev/nvidia${device.minorNumber ?? '?'} open (${hidden.via.join('+')}) but NVML does not list it`]);
      }
      const bytes = summary?.unattributedBytes ?? null;
      if (bytes !== null && bytes > 0) {
        rows.push([String(device.index), '-', 'unattributed', formatBytes(bytes), '-', '-', '-', '-', '-', 'used memory no listed process accounts for (teardown in progress, or invisible holders)']);
      }
      if (device.processes === null || device.processes === undefined) {
        const failure = device.fieldErrors.processes;
        rows.push([String(device.index), '-', 'unreadable', device.memory === null ? '?' : formatBytes(device.memory.usedBytes), '-', '-', '-', '-', '-', holdersUnknownReason(null, failure) ?? '']);
      } else if (listed.length === 0 && (bytes === null || bytes <= 0) && (summary?.hiddenHolders.length ?? 0) === 0) {
        rows.push([String(device.index), '-', 'none', device.memory === null ? '?' : formatBytes(device.memory.usedBytes), '-', '-', '-', '-', '-', device.pciBusId === null ? 'no holder' : `no holder (${shortBusId(device.pciBusId)})`]);
      }
    }
    let text = `${textTable(rows, { width, wrap: [HOLDER_COLUMNS.indexOf('WHY'), HOLDER_COLUMNS.indexOf('NAME')], fold: FOLDED_FIRST.map((name) => HOLDER_COLUMNS.indexOf(name)) })}\n`;
    for (const device of devices) {
      const memoryUnknown = holderMemoryUnknownReason(device.processes);
      if (memoryUnknown !== null) text += `\n${wrapLine(`GPU ${device.index}: ${memoryUnknown}.`, width)}\n`;
    }
    if (report.nestedPidNamespace) text += `\n${wrapLine('Note: gpugate runs in a nested PID namespace; NVML\'s pids cannot be looked up here (run with the host PID namespace to attribute holders).', width)}\n`;
    const shm = report.shm;
    text += `\n/dev/shm: ${shm.leaked.length} leaked file(s)`;
    if (shm.tmpfsFreeBytes !== null && shm.tmpfsTotalBytes !== null) text += `, ${formatBytes(shm.tmpfsFreeBytes)} free of ${formatBytes(shm.tmpfsTotalBytes)}`;
    text += '\n';
    for (const entry of shm.leaked) text += `${wrapLine(`  ${escapeForTerminal(entry.path)}  ${formatBytes(entry.allocatedBytes)}  (no process has it open or mapped)`, width)}\n`;
    context.stdout.write(text);
    return finish();
  } finally {
    await closeSession(session);
  }
}
