/**
 * Reading the GPUs for a command that reports on the selected ones (status, holders, the stale
 * scan of check/wait): one snapshot with process lists under the NVML backstop, the --gpus /
 * environment selection applied to it, and the selection's warnings logged once.
 */

import type { DeviceSelection } from '../gate/devices';
import type { GpuDevice, NvmlSession, Snapshot } from '../types';
import type { CommandContext } from './command-context';
import type { SessionSettings } from './criteria-settings';
import { withBackstop } from './nvml-session';

/** A snapshot of every GPU plus which of them the command was asked about. */
export interface SelectedSnapshot {
  /** Every device NVML reports (holder inspection wants the whole snapshot). */
  snapshot: Snapshot;
  selection: DeviceSelection;
  /** The selected devices, in NVML index order. */
  devices: GpuDevice[];
}

/**
 * Read every GPU with its processes, select per `settings.gpus` (or the environment) and log the
 * selection's warnings. Rejects with the NvmlError, the DeviceSelectionError, or exit 69 from
 * the backstop.
 */
export async function readSelectedSnapshot(
  session: NvmlSession,
  settings: Pick<SessionSettings, 'gpus' | 'callTimeoutMs'>,
  context: Pick<CommandContext, 'env' | 'logger'>,
): Promise<SelectedSnapshot> {
  const snapshot = await withBackstop(session.snapshot({ processes: true }), settings.callTimeoutMs, 'reading the GPUs');
  const { selectDevices } = require('../gate/devices') as typeof import('../gate/devices');
  const selection = selectDevices(snapshot.devices, settings.gpus, context.env);
  for (const warning of selection.warnings) context.logger.warning(warning);
  const devices = snapshot.devices.filter((device) => selection.indices.includes(device.index));
  return { snapshot, selection, devices };
}
