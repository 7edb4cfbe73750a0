/**
 * Turns the flags of `wait`, `check`, `status` and `holders` into typed settings: sizes and
 * durations parsed with their units, choices checked, conflicting flags rejected. Everything
 * wrong here is a usage error (exit 64) that names the flag, the value and what was expected.
 */

import { ConfigError } from '../config-error';
import { resolveCriteria, type CriteriaOptions, type MinFree } from '../gate/criteria';
import { ENGINE_NAMES, type EngineName } from '../gate/engine-view';
import { parseSelectorList } from '../gate/devices';
import { gateDefaults } from '../gate/gate-defaults';
import { parseDuration, parseSize, parseSizeOrFraction, parseSizeOrPercentage, type SizeOrFraction } from '../units';
import { CliError } from './cli-error';
import { booleanFlag, listFlag, stringFlag } from './command-context';
import { ExitCode } from './exit-codes';
import type { CommandName } from './option-table';
import type { FlagValues } from './parse-command-line';

/** What to do with stale holders and leaked shm. */
export type StalePolicy = 'report' | 'fail' | 'ignore';

/** How results are printed. */
export type OutputFormat = 'text' | 'json' | 'prometheus';

/** Settings every GPU command shares. */
export interface SessionSettings {
  /** Selectors from --gpus; undefined = take the environment / all. */
  gpus: string[] | undefined;
  libraryPath: string | undefined;
  callTimeoutMs: number;
  format: OutputFormat;
  /** `--output PATH` (prometheus only): the file to replace atomically instead of stdout. */
  output: string | undefined;
}

/** Settings of `wait` and `check`. */
export interface CriteriaSettings extends SessionSettings {
  /** With --for ENGINE: a fraction, the engine's own --gpu-memory-utilization. */
  minFree: SizeOrFraction | undefined;
  /** --for ENGINE: judge --min-free as the engine's start check does. */
  engine: EngineName | undefined;
  marginBytes: number | undefined;
  maxUsed: SizeOrFraction | undefined;
  noProcesses: boolean;
  ignore: Array<number | string>;
  /** --allow-empty: a selection of no GPU succeeds instead of exiting 78. */
  allowEmpty: boolean;
  stale: StalePolicy;
  killStale: boolean;
  killGraceMs: number;
  cleanShm: string[];
  dryRun: boolean;
  notify: boolean;
  reportFile: string | undefined;
}

/** Settings of `wait`. */
export interface WaitSettings extends CriteriaSettings {
  stableMs: number;
  stableToleranceBytes: number;
  timeoutMs: number;
  intervalMs: number;
}

/** The GPU selection and the per-GPU criteria of the settings, as the library's options take them. */
export function criteriaOptionsOf(settings: CriteriaSettings): Pick<CriteriaOptions, 'minFree' | 'marginBytes' | 'maxUsed' | 'noProcesses' | 'ignore'> & { gpus?: string[] } {
  return {
    ...(settings.gpus !== undefined ? { gpus: settings.gpus } : {}),
    ...(settings.minFree !== undefined ? { minFree: minFreeOf(settings.minFree, settings.engine) } : {}),
    ...(settings.marginBytes !== undefined ? { marginBytes: settings.marginBytes } : {}),
    ...(settings.maxUsed !== undefined ? { maxUsed: settings.maxUsed } : {}),
    noProcesses: settings.noProcesses,
    ignore: settings.ignore,
  };
}

/** --min-free as the library takes it: in the engine's terms with --for (the parser made sure it is a fraction). */
export function minFreeOf(minFree: SizeOrFraction, engine: EngineName | undefined): MinFree {
  if (engine === undefined || !('fraction' in minFree)) return minFree;
  return { engine, utilization: minFree.fraction };
}

/**
 * --for ENGINE: one of ENGINE_NAMES, and --min-free a fraction (the engine's
 * --gpu-memory-utilization), never a size; undefined without --for.
 */
function engineFlag(command: CommandName, values: FlagValues, minFree: SizeOrFraction | undefined): EngineName | undefined {
  const text = stringFlag(values, 'for');
  if (text === undefined) return undefined;
  const engine = ENGINE_NAMES.find((name) => name === text);
  if (engine === undefined) throw usage(`--for ${JSON.stringify(text)}: expected one of ${ENGINE_NAMES.join(', ')}`);
  if (minFree === undefined) throw usage(`gpugate ${command}: --for ${engine} judges --min-free as the engine does; give --min-free FRACTION (its --gpu-memory-utilization, e.g. 0.9)`);
  if (!('fraction' in minFree)) {
    throw usage(`--min-free ${JSON.stringify(stringFlag(values, 'min-free'))}: with --for ${engine} expected a fraction (its --gpu-memory-utilization, e.g. 0.9 or 90%), not a size`);
  }
  return engine;
}

/** --min-free under --for: a bare number or a percentage is a fraction, whatever its value (the engine's check judges its range). */
function parseEngineFraction(text: string): SizeOrFraction {
  const trimmed = text.trim();
  return /^(?:\d+(?:\.\d*)?|\.\d+)$/.test(trimmed) ? { fraction: Number(trimmed) } : parseSizeOrFraction(text);
}

/** Parse a flag's value with `parse`, turning a parse failure into a usage error naming the flag. */
function flagValue<T>(values: FlagValues, name: string, parse: (text: string) => T, fallback?: string): T | undefined {
  const text = stringFlag(values, name) ?? fallback;
  if (text === undefined) return undefined;
  try {
    return parse(text);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new CliError(`--${name} ${JSON.stringify(text)}: ${message}`, ExitCode.usage, 'usage-error');
  }
}

/** The flag of each memory criterion the library's check may refuse. */
const FLAG_OF_CRITERION: Readonly<Record<string, string>> = { minFree: 'min-free', marginBytes: 'margin', maxUsed: 'max-used' };

/**
 * The library's own check of the criteria (src/gate/criteria.ts), before any GPU is read: a value
 * that parses but can never be met (`--min-free 1`) is the same configuration error (78) the
 * library gives, here naming the flag.
 */
function checkCriteria(values: FlagValues, criteria: CriteriaOptions): void {
  try {
    resolveCriteria(criteria);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    const flag = FLAG_OF_CRITERION[error.option];
    const named = flag === undefined ? '' : `--${flag} ${JSON.stringify(stringFlag(values, flag))}: `;
    throw new CliError(`${named}${error.message}`, ExitCode.config, 'config-error');
  }
}

function usage(message: string): CliError {
  return new CliError(message, ExitCode.usage, 'usage-error');
}

/** Settings for `status` and `holders` (and the common part of the others). */
export function parseSessionSettings(command: CommandName, values: FlagValues): SessionSettings {
  const gpusText = stringFlag(values, 'gpus');
  let gpus: string[] | undefined;
  if (gpusText !== undefined) {
    gpus = parseSelectorList(gpusText);
    if (gpus.length === 0 && !booleanFlag(values, 'allow-empty')) {
      throw new CliError(`--gpus ${JSON.stringify(gpusText)} selects no GPU: expected a comma-separated list of NVML indices, GPU-/MIG- UUIDs or PCI bus ids${command === 'wait' || command === 'check' ? ' (or --allow-empty to accept none)' : ''}`, ExitCode.config, 'no-gpu-selected');
    }
  }
  const callTimeoutMs = flagValue(values, 'nvml-timeout', parseDuration) ?? gateDefaults.callTimeoutMs;
  if (callTimeoutMs <= 0) throw usage(`--nvml-timeout ${JSON.stringify(stringFlag(values, 'nvml-timeout'))}: expected a duration above 0`);
  const formatText = stringFlag(values, 'format');
  let format: OutputFormat = 'text';
  if (formatText !== undefined) {
    if (formatText !== 'text' && formatText !== 'json' && formatText !== 'prometheus') {
      throw usage(`--format ${JSON.stringify(formatText)}: expected text, json or prometheus`);
    }
    format = formatText;
  }
  if (booleanFlag(values, 'json')) {
    if (format === 'prometheus') throw usage(`gpugate ${command}: --json and --format prometheus exclude each other`);
    format = 'json';
  }
  const output = stringFlag(values, 'output');
  if (output !== undefined && format !== 'prometheus') throw usage(`gpugate ${command}: --output writes the prometheus format; add --format prometheus`);
  if (output === '') throw usage('--output "": expected a file path');
  return { gpus, libraryPath: stringFlag(values, 'library'), callTimeoutMs, format, output };
}

/** Settings for `check` (and the criteria part of `wait`). */
export function parseCriteriaSettings(command: CommandName, values: FlagValues): CriteriaSettings {
  const base = parseSessionSettings(command, values);
  const staleText = stringFlag(values, 'stale') ?? 'report';
  if (staleText !== 'report' && staleText !== 'fail' && staleText !== 'ignore') {
    throw usage(`--stale ${JSON.stringify(staleText)}: expected report, fail or ignore`);
  }
  const killStale = booleanFlag(values, 'kill-stale');
  const cleanShm = listFlag(values, 'clean-shm');
  const dryRun = booleanFlag(values, 'dry-run');
  if (staleText === 'ignore' && (killStale || cleanShm.length > 0)) {
    throw usage(`gpugate ${command}: --stale ignore skips the scan that --kill-stale and --clean-shm need`);
  }
  if (dryRun && !killStale && cleanShm.length === 0) {
    throw usage(`gpugate ${command}: --dry-run only applies to --kill-stale or --clean-shm`);
  }
  for (const pattern of cleanShm) {
    if (pattern === '' || pattern.includes('/')) {
      throw usage(`--clean-shm ${JSON.stringify(pattern)}: expected a file-name glob inside /dev/shm such as 'nccl-*' (no slashes)`);
    }
  }
  const ignore = listFlag(values, 'ignore').flatMap((text) => {
    const words = text.split(',').map((word) => word.trim()).filter((word) => word !== '');
    if (words.length === 0) throw usage(`--ignore ${JSON.stringify(text)}: expected a pid or a process name`);
    return words.map((word) => (/^\d+$/.test(word) ? Number(word) : word));
  });
  // With --for ENGINE, --min-free is the engine's fraction: any bare number is one (1.5: out of range, 78).
  const minFree = flagValue(values, 'min-free', stringFlag(values, 'for') === undefined ? parseSizeOrFraction : parseEngineFraction);
  const marginBytes = flagValue(values, 'margin', parseSize);
  if (marginBytes !== undefined && minFree === undefined) {
    throw usage(`gpugate ${command}: --margin adds to --min-free; give --min-free too`);
  }
  const killGraceMs = flagValue(values, 'kill-grace', parseDuration) ?? gateDefaults.killGraceMs;
  if (stringFlag(values, 'kill-grace') !== undefined && !killStale) {
    throw usage(`gpugate ${command}: --kill-grace only applies to --kill-stale`);
  }
  const maxUsed = flagValue(values, 'max-used', parseSizeOrPercentage);
  const engine = engineFlag(command, values, minFree);
  checkCriteria(values, { ...(minFree !== undefined ? { minFree: minFreeOf(minFree, engine) } : {}), ...(marginBytes !== undefined ? { marginBytes } : {}), ...(maxUsed !== undefined ? { maxUsed } : {}) });
  return {
    ...base,
    minFree,
    engine,
    marginBytes,
    maxUsed,
    noProcesses: booleanFlag(values, 'no-processes'),
    ignore,
    allowEmpty: booleanFlag(values, 'allow-empty'),
    stale: staleText,
    killStale,
    killGraceMs,
    cleanShm,
    dryRun,
    notify: booleanFlag(values, 'notify'),
    reportFile: stringFlag(values, 'report-file'),
  };
}

/** Settings for `wait` (and the polling part of `select --wait`). */
export function parseWaitSettings(values: FlagValues, command: CommandName = 'wait'): WaitSettings {
  const criteria = parseCriteriaSettings(command, values);
  const stableMs = flagValue(values, 'stable', parseDuration) ?? gateDefaults.stableMs;
  const stableToleranceBytes = flagValue(values, 'stable-tolerance', parseSize) ?? gateDefaults.stableToleranceBytes;
  const timeoutMs = flagValue(values, 'timeout', parseDuration) ?? gateDefaults.timeoutMs;
  const intervalMs = flagValue(values, 'interval', parseDuration) ?? gateDefaults.intervalMs;
  if (intervalMs <= 0) throw usage(`--interval ${JSON.stringify(stringFlag(values, 'interval'))}: expected a duration above 0`);
  return { ...criteria, stableMs, stableToleranceBytes, timeoutMs, intervalMs };
}
