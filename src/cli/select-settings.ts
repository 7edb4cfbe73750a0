/**
 * Turns the flags of `gpugate select` into typed settings: the criteria and polling flags it
 * shares with check and wait (parsed by the same code), plus how many GPUs, whether to wait,
 * the lease's holder and duration, and the output format. Wrong input is a usage error (64)
 * naming the flag, the value and what was expected.
 */

import { parseDuration } from '../units';
import { CliError } from './cli-error';
import { booleanFlag, stringFlag } from './command-context';
import { parseWaitSettings, type WaitSettings } from './criteria-settings';
import { ExitCode } from './exit-codes';
import type { FlagValues } from './parse-command-line';

/** How select prints its choice. */
export type SelectFormat = 'env' | 'json' | 'list';

/** Settings of `select`. */
export interface SelectSettings extends WaitSettings {
  count: number;
  /** --wait: poll until enough GPUs are eligible. */
  wait: boolean;
  /** False with --no-lease. */
  lease: boolean;
  /** --lease-pid: a pid, null for `none`, undefined for the default (gpugate's parent; none with --lease). */
  leasePid: number | null | undefined;
  /** --lease DUR in ms, or null. */
  leaseMs: number | null;
  output: undefined;
  selectFormat: SelectFormat;
}

function usage(message: string): CliError {
  return new CliError(message, ExitCode.usage, 'usage-error');
}

const POLLING_FLAGS = ['timeout', 'interval', 'stable', 'stable-tolerance'] as const;

/** Settings for `select`. */
export function parseSelectSettings(values: FlagValues): SelectSettings {
  // --format here takes env|json|list, not the text|json|prometheus of the report commands.
  const shared = parseWaitSettings({ ...values, format: undefined, json: undefined }, 'select');
  const countText = stringFlag(values, 'count');
  if (countText === undefined) throw usage('gpugate select: --count N is required (how many GPUs to choose)');
  if (!/^\d+$/.test(countText.trim()) || Number(countText) < 1 || !Number.isSafeInteger(Number(countText))) {
    throw usage(`--count ${JSON.stringify(countText)}: expected a whole number of GPUs, 1 or more`);
  }
  const wait = booleanFlag(values, 'wait');
  if (!wait) {
    const given = POLLING_FLAGS.filter((name) => stringFlag(values, name) !== undefined);
    if (given.length > 0) throw usage(`gpugate select: --${given[0]!} only applies with --wait (without it one sample decides)`);
  }
  const lease = !booleanFlag(values, 'no-lease');
  const leaseText = stringFlag(values, 'lease');
  const pidText = stringFlag(values, 'lease-pid');
  if (!lease && (leaseText !== undefined || pidText !== undefined)) {
    throw usage(`gpugate select: --no-lease excludes --${leaseText !== undefined ? 'lease' : 'lease-pid'}`);
  }
  let leaseMs: number | null = null;
  if (leaseText !== undefined) {
    try {
      leaseMs = parseDuration(leaseText);
    } catch (error) {
      throw usage(`--lease ${JSON.stringify(leaseText)}: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (leaseMs <= 0) throw usage(`--lease ${JSON.stringify(leaseText)}: expected a duration above 0`);
  }
  let leasePid: number | null | undefined;
  if (pidText !== undefined) {
    if (pidText.trim() === 'none') leasePid = null;
    else if (/^\d+$/.test(pidText.trim()) && Number(pidText) >= 1 && Number.isSafeInteger(Number(pidText))) leasePid = Number(pidText);
    else throw usage(`--lease-pid ${JSON.stringify(pidText)}: expected a process id (1 or more) or none`);
  }
  if (leasePid === process.pid) {
    throw usage(`--lease-pid ${leasePid} names this gpugate process, which exits as soon as it has printed: name the process that will use the GPUs (in a script, $$ of a shell that runs more than this one command)`);
  }
  if (leasePid === null && leaseMs === null) {
    throw usage('gpugate select: --lease-pid none needs --lease DUR, or the lease could never end');
  }
  const formatText = stringFlag(values, 'format');
  let selectFormat: SelectFormat = 'env';
  if (formatText !== undefined) {
    if (formatText !== 'env' && formatText !== 'json' && formatText !== 'list') throw usage(`--format ${JSON.stringify(formatText)}: expected env, json or list`);
    selectFormat = formatText;
  }
  if (booleanFlag(values, 'json')) {
    if (formatText !== undefined && formatText !== 'json') throw usage(`gpugate select: --json and --format ${formatText} exclude each other`);
    selectFormat = 'json';
  }
  return { ...shared, format: selectFormat === 'json' ? 'json' : 'text', output: undefined, count: Number(countText), wait, lease, leasePid, leaseMs, selectFormat };
}
