/**
 * The option checks of the gate family, declared once per function as a table (key → check of
 * its value): gate(), waitForGpusFree() and checkGpusOnce() reject an unknown key, a value of the
 * wrong type and a duration no timer can hold, before NVML is opened. Whether the criteria can
 * ever be met is criteria.ts's to say (resolveCriteria).
 */
import { ConfigError } from '../config-error';
import { checkedWhereUsed, checkOptionKeys, describeValue, type OptionCheck, type OptionTable } from '../option-keys';
import { formatDuration, MAX_DURATION_MS } from '../units';
import { minFreeOf } from './criteria';
import type { GateOptions, WaitOptions } from './gate-options';
import { INSPECT_OPTION_CHECKS, type InspectOptions } from './stale';

const nonNegativeNumber: OptionCheck = (value, name) =>
  typeof value === 'number' && Number.isFinite(value) && value >= 0 ? null : `option ${name} must be a finite number >= 0, got ${describeValue(value)}`;

/** A wait's timeout: a duration, or Infinity for none. */
const timeout: OptionCheck = (value, name) => (value === Infinity ? null : nonNegativeNumber(value, name));

const boolean: OptionCheck = (value, name) => (typeof value === 'boolean' ? null : `option ${name} must be a boolean, got ${describeValue(value)}`);

const callback: OptionCheck = (value, name) => (typeof value === 'function' ? null : `option ${name} must be a function, got ${describeValue(value)}`);

/** Every element of an array passes `ok`; the complaint names the first that does not. */
function arrayOf(expected: string, element: string, ok: (item: unknown) => boolean): OptionCheck {
  return (value, name) => {
    if (!Array.isArray(value)) return `option ${name} must be an array of ${expected}, got ${describeValue(value)}`;
    const index = value.findIndex((item) => !ok(item));
    return index === -1 ? null : `option ${name}[${index}] must be ${element}, got ${describeValue(value[index])}`;
  };
}

const isObject = (value: unknown): value is object => typeof value === 'object' && value !== null;

/** minFree: the criterion as an object, or a number or text in the CLI's --min-free grammar (parsed here: a UsageError as the CLI gives). */
const minFree: OptionCheck = (value, name) => {
  if (typeof value === 'number' || typeof value === 'string') {
    minFreeOf(value);
    return null;
  }
  if (isObject(value) && ('fraction' in value || 'bytes' in value || 'engine' in value)) return null;
  return (
    `option ${name} must be { fraction } or { bytes }, got ${describeValue(value)}; ` +
    "also taken: a fraction (0.9), text as --min-free takes it ('90%', '86GiB'), an engine's own check ({ engine: 'vllm', utilization, contextBytes? })"
  );
};

const maxUsed: OptionCheck = (value, name) =>
  isObject(value) && ('fraction' in value || 'bytes' in value) ? null : `option ${name} must be { fraction } or { bytes }, got ${describeValue(value)}`;

/** inspectHolders: a boolean, or the inspection's own options, checked by inspectHolders()'s table. */
const inspectHolders: OptionCheck = (value, name) => {
  if (typeof value === 'boolean') return null;
  if (!isObject(value)) return `option ${name} must be a boolean or the inspection's options (procRoot…), got ${describeValue(value)}`;
  checkOptionKeys<InspectOptions>(`option ${name}`, value, INSPECT_OPTION_CHECKS, '{ procRoot, unitCgroup }');
  return null;
};

/** The options of waitForGpusFree and checkGpusOnce. */
export const WAIT_OPTION_CHECKS: OptionTable<WaitOptions> = {
  gpus: arrayOf(
    'NVML indices (integers >= 0, e.g. [0, 1]) or selector strings (indices, GPU-/MIG- UUIDs, PCI bus ids)',
    'an NVML index (an integer >= 0) or a non-empty selector string',
    (item) => (typeof item === 'string' && item.trim() !== '') || (typeof item === 'number' && Number.isInteger(item) && item >= 0),
  ),
  session: (value, name) => (isObject(value) && typeof (value as { snapshot?: unknown }).snapshot === 'function' ? null : `option ${name} must be an open session (openNvml()), got ${describeValue(value)}`),
  libraryPath: checkedWhereUsed,
  callTimeoutMs: nonNegativeNumber,
  timeoutMs: timeout,
  intervalMs: nonNegativeNumber,
  signal: (value, name) => (value instanceof AbortSignal ? null : `option ${name} must be an AbortSignal, got ${describeValue(value)}`),
  onPoll: callback,
  inspectHolders,
  env: (value, name) => (isObject(value) ? null : `option ${name} must be an object of environment variables, got ${describeValue(value)}`),
  allowEmptySelection: boolean,
  minFree,
  marginBytes: nonNegativeNumber,
  maxUsed,
  noProcesses: boolean,
  ignore: arrayOf('pids and process names', 'a pid (an integer > 0) or a process name', (item) => (typeof item === 'string' && item !== '') || (typeof item === 'number' && Number.isInteger(item) && item > 0)),
  ignoreDefaults: boolean,
  stableMs: nonNegativeNumber,
  stableToleranceBytes: nonNegativeNumber,
};

/** The options of gate(): a wait's, and the stale policy and actions. */
export const GATE_OPTION_CHECKS: OptionTable<GateOptions> = {
  ...WAIT_OPTION_CHECKS,
  mode: (value, name) => (value === 'wait' || value === 'check' ? null : `option ${name} must be 'wait' or 'check', got ${describeValue(value)}`),
  stale: (value, name) => (value === 'report' || value === 'fail' || value === 'ignore' ? null : `option ${name} must be 'report', 'fail' or 'ignore', got ${describeValue(value)}`),
  killStale: boolean,
  killGraceMs: nonNegativeNumber,
  cleanShm: (value, name) =>
    Array.isArray(value) && value.every((glob) => typeof glob === 'string' && glob !== '' && !glob.includes('/'))
      ? null
      : `option ${name} must be an array of file-name globs inside /dev/shm such as 'nccl-*' (no slashes), got ${describeValue(value)}`,
  dryRun: boolean,
  onEvent: callback,
  accept: callback,
};

const WAIT_EXAMPLE = '{ gpus, minFree, timeoutMs }';

/** Rejects options of waitForGpusFree or checkGpusOnce (`fn`) with an unknown key or a value of the wrong type. */
export function checkWaitOptions(fn: 'waitForGpusFree' | 'checkGpusOnce', options: unknown): asserts options is WaitOptions {
  checkOptionKeys<WaitOptions>(`${fn}(options)`, options, WAIT_OPTION_CHECKS, WAIT_EXAMPLE);
}

/** Rejects options of gate() with an unknown key, a value of the wrong type, or actions its stale policy cannot take. */
export function checkGateOptions(options: unknown): asserts options is GateOptions {
  checkOptionKeys<GateOptions>('gate(options)', options, GATE_OPTION_CHECKS, WAIT_EXAMPLE);
  if (options.stale === 'ignore' && (options.killStale === true || (options.cleanShm ?? []).length > 0)) {
    throw new ConfigError('stale', "option stale 'ignore' skips the scan that killStale and cleanShm need");
  }
}

/** The duration options; each one at most MAX_DURATION_MS (timeoutMs may be Infinity: no timeout). */
const DURATION_OPTIONS = ['timeoutMs', 'intervalMs', 'stableMs', 'killGraceMs', 'callTimeoutMs'] as const;

/**
 * Rejects a duration option longer than a timer can hold (Node would fire it after 1 ms: a
 * timeout of 1e20 ms would end the wait at once) with a ConfigError naming the option.
 */
export function checkDurationLimits(options: { [name in (typeof DURATION_OPTIONS)[number]]?: number | undefined }): void {
  // A poll interval of 0 would spin on the driver (the command line refuses --interval 0 too).
  if (options.intervalMs === 0) throw new ConfigError('intervalMs', 'option intervalMs 0 would poll NVML without a pause: expected a duration above 0 ms');
  for (const name of DURATION_OPTIONS) {
    const value = options[name];
    if (name === 'timeoutMs' && value === Infinity) continue;
    if (typeof value === 'number' && value > MAX_DURATION_MS) {
      const orNone = name === 'timeoutMs' ? ', or Infinity for no timeout' : '';
      throw new ConfigError(name, `option ${name} ${value} is too long: expected at most ${MAX_DURATION_MS} ms (${formatDuration(MAX_DURATION_MS)}), the longest delay a timer holds${orNone}`);
    }
  }
}
