/**
 * Turns the addon's health reading (one entry per NVML query: values or a return code) into a
 * typed {@link GpuHealth}: named clock event reasons, fabric state names, and every failed query
 * as a field error. No judgement here; src/doctor/ decides what a reading means.
 */
import { nvmlCodeName } from './nvml-error';
import type { NativeHealthField, NativeHealthReading } from './native-binding';
import type { ClockEventReason, FabricState, FieldError, GpuHealth } from '../types';

/** NVML's clock event reason bits (nvmlClocksEventReasons), lowest first. */
export const CLOCK_EVENT_REASON_BITS: ReadonlyArray<readonly [ClockEventReason, number]> = [
  ['gpu_idle', 0x1],
  ['applications_clocks_setting', 0x2],
  ['sw_power_cap', 0x4],
  ['hw_slowdown', 0x8],
  ['sync_boost', 0x10],
  ['sw_thermal_slowdown', 0x20],
  ['hw_thermal_slowdown', 0x40],
  ['hw_power_brake_slowdown', 0x80],
  ['display_clock_setting', 0x100],
];

const FABRIC_STATES: readonly FabricState[] = ['not_supported', 'not_started', 'in_progress', 'completed'];

/** The clock event reasons named by a mask. */
export function clockEventReasonsOf(mask: number): ClockEventReason[] {
  return CLOCK_EVENT_REASON_BITS.filter(([, bit]) => (mask & bit) !== 0).map(([name]) => name);
}

/** Decodes one device's health reading; a query the addon did not report counts as not found. */
export function decodeHealth(reading: NativeHealthReading): GpuHealth {
  const fieldErrors: Record<string, FieldError> = {};
  /** The values of query `name`, or null with its failure recorded under `as`. */
  const read = (name: string, as: string = name): Record<string, number> | null => {
    const field: NativeHealthField | undefined = reading.fields[name];
    if (field === undefined) {
      fieldErrors[as] = { code: nvmlCodeName(13), nvmlReturn: 13, fn: name, message: `the addon reported no ${name} reading` };
      return null;
    }
    if (field.nvmlReturn !== 0) {
      fieldErrors[as] = { code: nvmlCodeName(field.nvmlReturn), nvmlReturn: field.nvmlReturn, fn: field.fn, message: field.message ?? nvmlCodeName(field.nvmlReturn) };
      return null;
    }
    return field.values;
  };
  const value = (values: Record<string, number> | null, key: string): number | null => {
    const v = values?.[key];
    return v === undefined || Number.isNaN(v) ? null : v;
  };
  const mig = read('migMode');
  const rows = read('remappedRows');
  const ecc = read('volatileUncorrectedEcc', 'volatileUncorrectedEccErrors');
  const retired = read('retiredPagesPending');
  const clocks = read('clockEventReasons');
  const fabric = read('fabric');
  const mask = clocks === null ? null : (value(clocks, 'low') ?? 0) + (value(clocks, 'high') ?? 0) * 2 ** 32;
  return {
    index: reading.index,
    migMode: mig === null ? null : { current: value(mig, 'current') === 1, pending: value(mig, 'pending') === 1 },
    remappedRows: rows === null ? null : {
      correctable: value(rows, 'correctable') ?? 0,
      uncorrectable: value(rows, 'uncorrectable') ?? 0,
      pending: value(rows, 'pending') === 1,
      failureOccurred: value(rows, 'failureOccurred') === 1,
    },
    volatileUncorrectedEccErrors: value(ecc, 'count'),
    retiredPagesPending: retired === null ? null : value(retired, 'pending') === 1,
    clockEventReasons: mask === null ? null : clockEventReasonsOf(mask),
    clockEventReasonBits: mask,
    pcie: {
      generation: value(read('pcieGeneration', 'pcie.generation'), 'value'),
      maxGeneration: value(read('pcieMaxGeneration', 'pcie.maxGeneration'), 'value'),
      width: value(read('pcieWidth', 'pcie.width'), 'value'),
      maxWidth: value(read('pcieMaxWidth', 'pcie.maxWidth'), 'value'),
    },
    fabric: fabric === null ? null : {
      state: FABRIC_STATES[value(fabric, 'state') ?? 0] ?? 'not_supported',
      status: nvmlCodeName(value(fabric, 'status') ?? 0),
      cliqueId: value(fabric, 'cliqueId') ?? 0,
    },
    fieldErrors,
  };
}
