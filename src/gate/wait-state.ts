/**
 * A wait prepared once before its first read: the criteria resolved, the GPUs (or MIG instances)
 * selected, the holder-inspection context ready to be read from /proc on first use.
 */
import type { NvmlMemoryReader, NvmlSession } from '../types';
import { emptySelectionError, selectDevices, type DeviceSelection, type SelectableDevice } from './devices';
import { DeviceSelectionError } from './device-selection-error';
import { resolveCriteria, StabilityTracker } from './criteria';
import type { WaitState } from './evaluation';
import { prepareInspectContext, type InspectContext } from './stale';
import { NvmlError } from '../nvml/nvml-error';
import { deviceList } from './shared-session';
import type { WaitOptions } from './gate-options';

/** What a wait evaluates: each selected GPU whole, or each of its selected MIG instances. */
function unitsOf(selection: DeviceSelection, devices: readonly SelectableDevice[]): Array<{ index: number; migUuid: string | null }> {
  const units: Array<{ index: number; migUuid: string | null }> = [];
  for (const index of selection.indices) {
    const device = devices.find((d) => d.index === index);
    const migs = (device?.migDevices ?? []).filter((m) => selection.migUuids.includes(m.uuid));
    if (migs.length === 0) units.push({ index, migUuid: null });
    else for (const mig of migs) units.push({ index, migUuid: mig.uuid });
  }
  return units;
}

/**
 * Selects the GPUs from the session's identities (no NVML call) when it has them; a selection
 * that needs MIG instances (a MIG UUID), or one that fails (its message lists every MIG
 * instance), is made again on a read of every field.
 */
async function selectGpus(options: WaitOptions, session: NvmlSession, env: NodeJS.ProcessEnv): Promise<{ selection: DeviceSelection; devices: readonly SelectableDevice[] }> {
  const identities = (session as Partial<NvmlMemoryReader>).devices;
  if (identities !== undefined) {
    try {
      return { selection: selectDevices(identities, options.gpus, env), devices: identities };
    } catch (error) {
      if (!(error instanceof DeviceSelectionError) && !(error instanceof NvmlError)) throw error;
    }
  }
  const devices = await deviceList(session);
  return { selection: selectDevices(devices, options.gpus, env), devices };
}

/** Resolves the criteria, selects the GPUs once and builds the holder-inspection context once. */
export async function prepareWait(options: WaitOptions, session: NvmlSession, startMs: number): Promise<WaitState> {
  const criteria = resolveCriteria(options);
  const env = options.env ?? process.env;
  const { selection, devices } = await selectGpus(options, session, env);
  if (selection.indices.length === 0 && options.allowEmptySelection !== true) throw emptySelectionError(selection, options.gpus, env);
  let inspectContext: (() => Promise<InspectContext>) | null = null;
  if (options.inspectHolders !== false) {
    const inspectOptions = typeof options.inspectHolders === 'object' ? options.inspectHolders : {};
    let prepared: Promise<InspectContext> | null = null;
    inspectContext = () => (prepared ??= prepareInspectContext(inspectOptions));
  }
  const units = unitsOf(selection, devices);
  return {
    selection,
    criteria,
    tracker: new StabilityTracker(criteria.stableToleranceBytes),
    inspectContext,
    startMs,
    polls: 0,
    units,
    full: units.some((unit) => unit.migUuid !== null),
    known: new Map(),
    computeModes: new Map(),
    last: null,
  };
}
