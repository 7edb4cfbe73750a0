/**
 * The drop-in that puts gpugate in front of an existing unit: the settings of the shipped
 * contrib/systemd/gpugate-wait.conf (a test keeps the two in step), fitted to the unit: the
 * gate's `--for vllm --min-free` from the service's own --gpu-memory-utilization, gpugate named by
 * absolute path (the installed command where there is one), start limits that a crash loop with this unit's RestartSec= still trips, and a
 * start timeout above the gate's that never shortens one the unit already has. It never makes
 * the unit worse than it was: a gate that an idle GPU of this host could never pass is not
 * written (the margin shrinks to what fits, or the command refuses), NotifyAccess= is only ever
 * widened, and a start limit the unit switched off stays off.
 */
import { ConfigError } from '../config-error';
import { findMemoryUtilization } from './unit-commands';
import { minFreeBytes } from '../gate/criteria';
import { contextBytesFor, type EngineMinFree, type EngineName } from '../gate/engine-view';
import { IDLE_BASELINE_BYTES, idleFreeBytes, largestIdleMarginBytes, type GpuSize } from '../gate/idle-room';
import { formatExecCommand } from '../host/systemd-exec-line';
import type { UnitProperties } from '../host/systemd-unit';
import { formatTimeSpanUsec } from '../host/systemd-time-span';
import { formatBytes, parseSize } from '../units';

/** The first line of every drop-in gpugate writes; it replaces only files that start with it. */
export const DROP_IN_MARKER = '# Written by gpugate systemd';

/** The drop-in's file name inside NAME.d/. */
export const DROP_IN_FILE = 'gpugate.conf';

/** The gate's flags, as in the shipped drop-in; --min-free is fitted to the unit. */
export const GATE_DEFAULTS = { minFree: 0.9, margin: '2GiB', stable: '5s', timeoutSec: 240 } as const;

/** The engine whose start check the gate computes: --gpu-memory-utilization is vLLM's flag. */
export const GATE_ENGINE: EngineName = 'vllm';

/** Starts a crash loop may make before the unit enters "failed" (the shipped drop-in's StartLimitBurst=). */
export const START_LIMIT_BURST = 6;

/** Room above the gate's --timeout in TimeoutStartSec= for Node's start-up and the other ExecStartPre= lines. */
const START_TIMEOUT_ROOM_SEC = 60;

/** How to run gpugate: the programs and files that the ExecStartPre= line starts (src/cli/gate-program.ts decides). */
export interface GateProgram {
  /** Words that start gpugate: ['/usr/local/bin/gpugate'], or e.g. ['/usr/bin/node', '--disable-sigusr1', '/opt/gpugate/dist/cli/main.js']. */
  argv: string[];
}

/** NotifyAccess= values from narrowest to widest. */
const NOTIFY_ACCESS_ORDER = ['none', 'main', 'exec', 'all'];

/** What the gate's --notify needs: the ExecStartPre= process itself may send STATUS=. */
const GATE_NOTIFY_ACCESS = 'exec';

/** What the drop-in was fitted to, for the text comments and --json. */
export interface DropIn {
  /** The file's text. */
  text: string;
  /** The gate's --min-free. */
  minFree: number;
  /** The gate's --margin, as written (2GiB, or less where an idle GPU of this host offers less room). */
  margin: string;
  /** Where --min-free came from. */
  minFreeFrom: 'gpu-memory-utilization' | 'default';
  /** StartLimitIntervalSec= in seconds. */
  startLimitIntervalSec: number;
  startLimitBurst: number;
  /** TimeoutStartSec= in seconds (the gate's --timeout plus a minute, or the unit's own when longer), or null when the unit has none. */
  timeoutStartSec: number | null;
  /** The ExecStartPre= line, or null when the unit already has a gate of its own elsewhere. */
  execStartPre: string | null;
  /** NotifyAccess= as the drop-in leaves it (written, or the unit's own wider one kept). */
  notifyAccess: string;
  /** What was kept from the unit or adjusted to this host, and why: one sentence each. */
  kept: string[];
}

/** How the drop-in is fitted beyond the unit itself. */
export interface DropInOptions {
  /** The unit already runs a gpugate wait that this file did not add. */
  keepExistingGate?: boolean;
  /** The host's GPUs, to keep the gate passable on them once idle; null when NVML could not say (the gate is then not checked). */
  gpus?: readonly GpuSize[] | null;
}

/**
 * Fit the drop-in to `unit`. `keepExistingGate`: the unit already runs a gpugate wait that this
 * file did not add. Nothing fitted depends on a setting the drop-in itself makes, so generating
 * it again once it is installed gives the same text.
 */
export function buildDropIn(unit: UnitProperties, program: GateProgram, options: DropInOptions = {}): DropIn {
  const utilization = findMemoryUtilization(unit);
  const minFree = utilization?.fraction ?? GATE_DEFAULTS.minFree;
  const minFreeFrom = utilization?.fraction != null ? 'gpu-memory-utilization' : 'default';
  const kept: string[] = [];
  const writeGate = options.keepExistingGate !== true;
  const margin = writeGate ? passableMargin(minFree, options.gpus ?? null, kept) : GATE_DEFAULTS.margin;
  const gateTimeoutUsec = GATE_DEFAULTS.timeoutSec * 1e6;
  const burst = START_LIMIT_BURST;
  // burst+1 starts must fit in the interval even when every start waits the gate's whole
  // --timeout: burst × (RestartSec= + timeout), with a fifth on top, in whole minutes.
  const slowestLoopUsec = burst * (unit.restartUsec + gateTimeoutUsec);
  const intervalMin = Math.ceil((slowestLoopUsec * 1.2) / 60e6);
  // StartLimitIntervalSec=0 (or StartLimitBurst=0) is the admin's explicit "no start limit": never re-enabled.
  const startLimitOff = unit.startLimitIntervalUsec === 0 || unit.startLimitBurst === 0;
  if (startLimitOff) {
    kept.push(`kept the unit's start limit off (StartLimitIntervalSec=${formatTimeSpanUsec(unit.startLimitIntervalUsec)}, StartLimitBurst=${unit.startLimitBurst}): an explicit "no limit" is the admin's choice, so a crash loop is not ended by systemd (gpugate doctor --unit reports it)`);
  }
  // Only ever widen NotifyAccess=: `all` lets a child of the main process make a Type=notify unit ready.
  const keepNotify = NOTIFY_ACCESS_ORDER.indexOf(unit.notifyAccess) > NOTIFY_ACCESS_ORDER.indexOf(GATE_NOTIFY_ACCESS);
  const notifyAccess = keepNotify ? unit.notifyAccess : GATE_NOTIFY_ACCESS;
  if (keepNotify) kept.push(`kept NotifyAccess=${unit.notifyAccess}: it already lets gpugate send STATUS=, and narrowing it to ${GATE_NOTIFY_ACCESS} would drop the notifications of the unit's other processes (a Type=notify service made ready by a child would never start)`);
  const wantedTimeoutSec = GATE_DEFAULTS.timeoutSec + START_TIMEOUT_ROOM_SEC;
  // Never shorter than the unit's own (a slow model load under Type=notify needs it), and written
  // even when equal, so the text does not change once this file's own value is in effect.
  const timeoutStartSec = unit.timeoutStartUsec === Infinity ? null : Math.max(wantedTimeoutSec, Math.ceil(unit.timeoutStartUsec / 1e6));
  const gate = [...program.argv, 'wait', '--for', GATE_ENGINE, '--min-free', String(minFree), '--margin', margin, '--stable', GATE_DEFAULTS.stable,
    '--timeout', `${GATE_DEFAULTS.timeoutSec}s`, '--notify'];
  const execStartPre = writeGate ? formatExecCommand(gate) : null;
  const restartSec = formatTimeSpanUsec(unit.restartUsec);
  const lines = [
    `${DROP_IN_MARKER} --unit ${unit.name}; it replaces this file only while this line comes first.`,
    '# Apply with: systemctl daemon-reload',
    '',
    '[Unit]',
    ...(startLimitOff ? [
      `# The unit switches its start limit off (StartLimitIntervalSec=${formatTimeSpanUsec(unit.startLimitIntervalUsec)}, StartLimitBurst=${unit.startLimitBurst}): kept off, as its admin chose.`,
    ] : [
      `# Even if every start waits the gate's whole --timeout ${GATE_DEFAULTS.timeoutSec}s, ${burst + 1} starts with RestartSec=${restartSec}`,
      `# take ${burst} x (${restartSec} + ${GATE_DEFAULTS.timeoutSec}s) = ${formatTimeSpanUsec(slowestLoopUsec)}: inside this interval, so a crash loop ends.`,
      `StartLimitIntervalSec=${intervalMin}min`,
      `StartLimitBurst=${burst}`,
    ]),
    '',
    '[Service]',
    ...(keepNotify ? [
      `# The unit's own NotifyAccess=${unit.notifyAccess} already lets gpugate, running as ExecStartPre=, show its progress in \`systemctl status\`: kept.`,
    ] : [
      '# Lets gpugate, running as ExecStartPre=, show its progress in `systemctl status`.',
      `NotifyAccess=${GATE_NOTIFY_ACCESS}`,
    ]),
  ];
  if (execStartPre === null) {
    lines.push('# The unit already runs gpugate wait in ExecStartPre= (not from this file): no second gate.');
  } else {
    lines.push(
      minFreeFrom === 'gpu-memory-utilization'
        ? `# Start only when vLLM at ${minFree} (the service's --gpu-memory-utilization) would find enough free memory on each GPU, plus ${margin},`
        : `# Start only when vLLM at ${minFree} (its default --gpu-memory-utilization) would find enough free memory on each GPU, plus ${margin},`,
      `# as vLLM checks it (--for vllm: total less reserved, free less its CUDA context)`,
      `# and stable ${GATE_DEFAULTS.stable}. No "-" prefix: still busy after ${GATE_DEFAULTS.timeoutSec}s fails the start (status=75/TEMPFAIL).`,
      ...(margin === GATE_DEFAULTS.margin ? [] : [`# The margin is below ${GATE_DEFAULTS.margin} because an idle GPU of this host has no more room above what vLLM at ${minFree} needs.`]),
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
    margin,
    minFreeFrom,
    startLimitIntervalSec: startLimitOff ? unit.startLimitIntervalUsec / 1e6 : intervalMin * 60,
    startLimitBurst: startLimitOff ? unit.startLimitBurst : burst,
    timeoutStartSec,
    execStartPre,
    notifyAccess,
    kept,
  };
}

/**
 * The gate's --margin: the shipped 2GiB when an idle GPU of every size on this host has room for
 * what vLLM at `utilization` needs (see engine-view.ts) plus that; else the most that fits, in
 * MiB (noted in `kept`). Throws a ConfigError (exit 78) naming the numbers when vLLM's need alone
 * is more than an idle GPU offers: neither the gate nor the service could ever start there.
 */
function passableMargin(utilization: number, gpus: readonly GpuSize[] | null, kept: string[]): string {
  const standard = parseSize(GATE_DEFAULTS.margin);
  if (gpus === null || gpus.length === 0) return GATE_DEFAULTS.margin;
  const criterion = gateCriterion(utilization);
  const room = largestIdleMarginBytes(criterion, gpus);
  if (room >= standard) return GATE_DEFAULTS.margin;
  const roomOn = (gpu: GpuSize): number => idleFreeBytes(gpu) - minFreeBytes(criterion, 0, { name: gpu.name ?? '', totalBytes: gpu.totalBytes, reservedBytes: gpu.reservedBytes });
  const tightest = gpus.reduce((a, b) => (roomOn(b) < roomOn(a) ? b : a));
  const needed = minFreeBytes(criterion, 0, { name: tightest.name ?? '', totalBytes: tightest.totalBytes, reservedBytes: tightest.reservedBytes });
  const context = contextBytesFor(criterion, tightest.name ?? '');
  const numbers = `GPU ${tightest.index} has ${formatBytes(tightest.totalBytes)} in total, ${tightest.reservedBytes === null ? 'reserved unknown' : `${formatBytes(tightest.reservedBytes)} reserved`}, ${formatBytes(IDLE_BASELINE_BYTES)} counted as used at idle: ${formatBytes(idleFreeBytes(tightest))} free when idle, and vLLM at ${utilization} needs ${formatBytes(needed)} (${utilization} of total less reserved, plus its ${formatBytes(context)} CUDA context)`;
  if (room < 0) {
    throw new ConfigError('minFree', `--gpu-memory-utilization ${utilization} asks more than an idle GPU of this host offers (${numbers}): no gate, and no service start, could pass; lower the unit's --gpu-memory-utilization`);
  }
  const margin = `${room / 1024 ** 2}MiB`;
  kept.push(`--margin ${margin} instead of ${GATE_DEFAULTS.margin}: ${numbers}, so ${GATE_DEFAULTS.margin} more could never be free and every start would fail`);
  return margin;
}

/** The gate's criterion: vLLM's own start check at the unit's --gpu-memory-utilization. */
function gateCriterion(utilization: number): EngineMinFree {
  return { engine: GATE_ENGINE, utilization };
}
