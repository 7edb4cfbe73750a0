/**
 * The drop-in that puts gpugate in front of an existing unit: the settings of the shipped
 * contrib/systemd/gpugate-wait.conf (a test keeps the two in step), fitted to the unit: the
 * gate's --min-free from the service's own --gpu-memory-utilization, gpugate and node named by
 * absolute path, start limits that a crash loop with this unit's RestartSec= still trips, and a
 * start timeout above the gate's that never shortens one the unit already has.
 */
import { join } from 'node:path';
import { findMemoryUtilization } from '../doctor/unit-commands';
import type { UnitProperties } from '../host/systemd-unit';
import { formatTimeSpanUsec } from '../host/systemd-time-span';
import { PACKAGE_ROOT } from '../package-root';

/** The first line of every drop-in gpugate writes; it replaces only files that start with it. */
export const DROP_IN_MARKER = '# Written by gpugate systemd';

/** The drop-in's file name inside NAME.d/. */
export const DROP_IN_FILE = 'gpugate.conf';

/** The gate's flags, as in the shipped drop-in; --min-free is fitted to the unit. */
export const GATE_DEFAULTS = { minFree: 0.9, margin: '2GiB', stable: '5s', timeoutSec: 240 } as const;

/** Starts a crash loop may make before the unit enters "failed" (the shipped drop-in's StartLimitBurst=). */
export const START_LIMIT_BURST = 6;

/** Room above the gate's --timeout in TimeoutStartSec= for Node's start-up and the other ExecStartPre= lines. */
const START_TIMEOUT_ROOM_SEC = 60;

/** How to run gpugate: the programs and files that the ExecStartPre= line starts. */
export interface GateProgram {
  /** Words that start gpugate, e.g. [process.execPath, '/usr/lib/node_modules/gpugate/dist/cli/main.js']. */
  argv: string[];
}

/** This gpugate: the running node and this package's dist/cli/main.js, both absolute. */
export function thisGateProgram(): GateProgram {
  return { argv: [process.execPath, join(PACKAGE_ROOT, 'dist', 'cli', 'main.js')] };
}

/** What the drop-in was fitted to, for the text comments and --json. */
export interface DropIn {
  /** The file's text. */
  text: string;
  /** The gate's --min-free. */
  minFree: number;
  /** Where --min-free came from. */
  minFreeFrom: 'gpu-memory-utilization' | 'default';
  /** StartLimitIntervalSec= in seconds. */
  startLimitIntervalSec: number;
  startLimitBurst: number;
  /** TimeoutStartSec= in seconds (the gate's --timeout plus a minute, or the unit's own when longer), or null when the unit has none. */
  timeoutStartSec: number | null;
  /** The ExecStartPre= line, or null when the unit already has a gate of its own elsewhere. */
  execStartPre: string | null;
}

/** Quote one word for an Exec line: blanks and quotes inside quotes, and `%` / `$` doubled so systemd passes them through. */
function execWord(word: string): string {
  const escaped = word.replace(/%/g, '%%').replace(/\$/g, '$$$$');
  return /^[A-Za-z0-9_@+=:,./-]+$/.test(escaped) ? escaped : `"${escaped.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

/**
 * Fit the drop-in to `unit`. `keepExistingGate`: the unit already runs a gpugate wait that this
 * file did not add. Nothing fitted depends on a setting the drop-in itself makes, so generating
 * it again once it is installed gives the same text.
 */
export function buildDropIn(unit: UnitProperties, program: GateProgram, options: { keepExistingGate?: boolean } = {}): DropIn {
  const utilization = findMemoryUtilization(unit);
  const minFree = utilization?.fraction ?? GATE_DEFAULTS.minFree;
  const minFreeFrom = utilization?.fraction != null ? 'gpu-memory-utilization' : 'default';
  const gateTimeoutUsec = GATE_DEFAULTS.timeoutSec * 1e6;
  const burst = START_LIMIT_BURST;
  // burst+1 starts must fit in the interval even when every start waits the gate's whole
  // --timeout: burst × (RestartSec= + timeout), with a fifth on top, in whole minutes.
  const slowestLoopUsec = burst * (unit.restartUsec + gateTimeoutUsec);
  const intervalMin = Math.ceil((slowestLoopUsec * 1.2) / 60e6);
  const wantedTimeoutSec = GATE_DEFAULTS.timeoutSec + START_TIMEOUT_ROOM_SEC;
  // Never shorter than the unit's own (a slow model load under Type=notify needs it), and written
  // even when equal, so the text does not change once this file's own value is in effect.
  const timeoutStartSec = unit.timeoutStartUsec === Infinity ? null : Math.max(wantedTimeoutSec, Math.ceil(unit.timeoutStartUsec / 1e6));
  const gate = [...program.argv, 'wait', '--min-free', String(minFree), '--margin', GATE_DEFAULTS.margin, '--stable', GATE_DEFAULTS.stable,
    '--timeout', `${GATE_DEFAULTS.timeoutSec}s`, '--notify'];
  const execStartPre = options.keepExistingGate === true ? null : gate.map(execWord).join(' ');
  const restartSec = formatTimeSpanUsec(unit.restartUsec);
  const lines = [
    `${DROP_IN_MARKER} --unit ${unit.name}; it replaces this file only while this line comes first.`,
    '# Apply with: systemctl daemon-reload',
    '',
    '[Unit]',
    `# Even if every start waits the gate's whole --timeout ${GATE_DEFAULTS.timeoutSec}s, ${burst + 1} starts with RestartSec=${restartSec}`,
    `# take ${burst} x (${restartSec} + ${GATE_DEFAULTS.timeoutSec}s) = ${formatTimeSpanUsec(slowestLoopUsec)}: inside this interval, so a crash loop ends.`,
    `StartLimitIntervalSec=${intervalMin}min`,
    `StartLimitBurst=${burst}`,
    '',
    '[Service]',
    '# Lets gpugate, running as ExecStartPre=, show its progress in `systemctl status`.',
    'NotifyAccess=exec',
  ];
  if (execStartPre === null) {
    lines.push('# The unit already runs gpugate wait in ExecStartPre= (not from this file): no second gate.');
  } else {
    lines.push(
      minFreeFrom === 'gpu-memory-utilization'
        ? `# Start only when ${minFree} of each GPU's memory (the service's --gpu-memory-utilization) plus ${GATE_DEFAULTS.margin} is free`
        : `# Start only when ${minFree} of each GPU's memory (vLLM's default --gpu-memory-utilization) plus ${GATE_DEFAULTS.margin} is free`,
      `# and stable ${GATE_DEFAULTS.stable}. No "-" prefix: still busy after ${GATE_DEFAULTS.timeoutSec}s fails the start (status=75/TEMPFAIL).`,
      `ExecStartPre=${execStartPre}`,
    );
  }
  if (timeoutStartSec === null) {
    lines.push('# TimeoutStartSec= stays the unit\'s own infinity: the gate\'s --timeout bounds the wait.');
  } else if (timeoutStartSec > wantedTimeoutSec) {
    lines.push(`# The unit's own start timeout, already above the gate's --timeout, so gpugate explains a timeout first.`, `TimeoutStartSec=${timeoutStartSec}`);
  } else {
    lines.push('# Above the gate\'s --timeout, so gpugate explains a timeout before systemd kills it.', `TimeoutStartSec=${timeoutStartSec}`);
  }
  return {
    text: `${lines.join('\n')}\n`,
    minFree,
    minFreeFrom,
    startLimitIntervalSec: intervalMin * 60,
    startLimitBurst: burst,
    timeoutStartSec,
    execStartPre,
  };
}
