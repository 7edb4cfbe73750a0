/**
 * `gpugate doctor --unit NAME`: is the systemd unit set up so that gpugate can protect it and a
 * crash loop ends? One finding per concern (restart limits, the gate, the start timeout, notify
 * access, kill mode, vLLM's memory fraction against the gate's, and, given the host's GPU sizes,
 * whether an idle GPU can pass the gate at all), each with the values it rests on.
 */
import { ConfigError } from '../config-error';
import { minFreeOf } from './criteria-settings';
import { IDLE_BASELINE_BYTES, idleShortfall, largestIdleMarginBytes, UNKNOWN_RESERVED_BYTES, type GpuSize } from '../gate/idle-room';
import { NODE_NO_INSPECTOR_SIGNAL, nodeLacksSignalGuard } from '../host/systemd-exec-line';
import { readUnitProperties, SystemdUnavailableError, type UnitProperties, type UnitSource } from '../host/systemd-unit';
import { normaliseUnitName } from '../host/systemd-unit-name';
import { formatTimeSpanUsec } from '../host/systemd-time-span';
import { formatBytes } from '../units';
import type { DoctorCheck, DoctorStatus } from '../doctor/doctor-check';
import { findMemoryUtilization, findUnitGate, type UnitGate } from './unit-commands';

/** Below this much room between the gate's --timeout and TimeoutStartSec=, Node's start-up and other ExecStartPre= lines can eat it. */
const TIMEOUT_ROOM_USEC = 10e6;

/** A gate's --min-free above the service's own fraction by more than this waits for memory the service will never use. */
const FRACTION_SLACK = 0.05;

/**
 * The findings for `unit`. `gate` is the unit's `gpugate wait` command (default: the one found
 * in its ExecStartPre=, or wrapping its ExecStart=). `gpus`: the host's GPU sizes, for
 * unit.gate-passable (left out when null or empty: NVML could not say, and the driver checks report why).
 */
export function checkUnit(unit: UnitProperties, gate: UnitGate | null = findUnitGate(unit), gpus: readonly GpuSize[] | null = null): DoctorCheck[] {
  const subject = `unit ${unit.name}`;
  const make = (id: string, status: DoctorStatus, summary: string, evidence: Record<string, unknown>, advice?: string): DoctorCheck => ({
    id: `unit.${id}`, subject, status, summary, evidence, ...(advice === undefined || status === 'pass' ? {} : { advice }),
  });
  const checks = [
    gateCheck(unit, gate, make),
    restartLimitCheck(unit, gate, make),
    startTimeoutCheck(unit, gate, make),
    notifyAccessCheck(unit, gate, make),
    killModeCheck(unit, gate, make),
    memoryFractionCheck(unit, gate, make),
    ...(gpus === null || gpus.length === 0 ? [] : [gatePassableCheck(unit, gate, gpus, make)]),
  ];
  if (unit.notes.length > 0) {
    checks.push(make('ignored-lines', 'warn', `${unit.notes.length} line(s) of the unit files are ignored by systemd`, { lines: unit.notes }, 'fix or remove these lines; systemd keeps the previous value of each'));
  }
  return checks;
}

/**
 * `doctor --unit NAME`: read the unit from `source` (see unitSourceFrom) and check it. A name that
 * is not a unit name throws a UsageError (exit 64); a unit that cannot be read (not loaded, not
 * in the directory, systemctl unreachable) is one failed check that says why.
 */
export async function checkUnitNamed(nameText: string, source: UnitSource, gpus: readonly GpuSize[] | null = null): Promise<DoctorCheck[]> {
  const name = normaliseUnitName(nameText);
  let unit: UnitProperties;
  try {
    unit = await readUnitProperties(name, source);
  } catch (error) {
    const readFailure = error instanceof ConfigError || error instanceof SystemdUnavailableError || typeof (error as NodeJS.ErrnoException).syscall === 'string';
    if (!readFailure) throw error;
    return [{
      id: 'unit.readable', subject: `unit ${name}`, status: 'fail',
      summary: `cannot read unit ${name}: ${(error as Error).message}`,
      evidence: { source: source.kind === 'systemctl' ? 'systemctl show' : source.directory },
      advice: source.kind === 'systemctl' ? 'check the name (systemctl list-unit-files), or read its files with --unit-path DIR' : 'check the name and the directory',
    }];
  }
  return checkUnit(unit, findUnitGate(unit), gpus);
}

type Make = (id: string, status: DoctorStatus, summary: string, evidence: Record<string, unknown>, advice?: string) => DoctorCheck;

const span = formatTimeSpanUsec;

function gateTimeoutUsec(gate: UnitGate | null): number | null {
  return gate?.settings === null || gate === null ? null : gate.settings.timeoutMs * 1000;
}

function gateCheck(unit: UnitProperties, gate: UnitGate | null, make: Make): DoctorCheck {
  const fix = `gpugate systemd --unit ${unit.name} --write  (then systemctl daemon-reload)`;
  if (gate === null) {
    return make('gate', 'fail', 'no gpugate wait in ExecStartPre=: a restart starts while the crashed attempt still holds GPU memory',
      { execStartPre: unit.execStartPre.map((c) => c.argv.join(' ')) }, fix);
  }
  const evidence = { setting: gate.setting, command: gate.command.argv.join(' '), ignoreErrors: gate.command.ignoreErrors };
  if (gate.error !== null) {
    return make('gate', 'fail', `the gate's command line is rejected by gpugate wait (it would exit 64 at every start): ${gate.error}`, evidence, 'correct the flags (gpugate wait --help)');
  }
  if (gate.command.ignoreErrors) {
    return make('gate', 'fail', `the gate runs as ${gate.setting}=-…: the "-" makes systemd ignore its failure, so a still-busy GPU (exit 75) starts the service anyway`,
      evidence, `remove the "-" in front of the gpugate command`);
  }
  if (nodeLacksSignalGuard(gate.launcher)) {
    return make('gate', 'warn',
      `the gate runs node without ${NODE_NO_INSPECTOR_SIGNAL}: until gpugate installs its own handler, a SIGUSR1 makes this root process open Node's inspector on 127.0.0.1:9229`,
      { ...evidence, launcher: gate.launcher }, `start node as "node ${NODE_NO_INSPECTOR_SIGNAL} …/gpugate/dist/cli/main.js wait …" (Node ≥ 22.14), e.g. ${fix}`);
  }
  if (gate.setting === 'ExecStart') {
    return make('gate', 'pass', 'gpugate wait wraps ExecStart= and starts the service once the GPUs are free', evidence);
  }
  return make('gate', 'pass', 'gpugate wait runs in ExecStartPre=; its failure fails the start', evidence);
}

function restartLimitCheck(unit: UnitProperties, gate: UnitGate | null, make: Make): DoctorCheck {
  const burst = unit.startLimitBurst;
  const interval = unit.startLimitIntervalUsec;
  const restart = unit.restartUsec;
  const gateTimeout = gateTimeoutUsec(gate);
  const evidence: Record<string, unknown> = {
    restart: unit.restart, restartSec: span(restart), startLimitIntervalSec: span(interval), startLimitBurst: burst,
    ...(gateTimeout === null ? {} : { gateTimeout: span(gateTimeout) }),
  };
  const advice = `set StartLimitIntervalSec= above StartLimitBurst × (RestartSec= + the gate's --timeout), e.g. gpugate systemd --unit ${unit.name} prints limits for this unit`;
  if (unit.restart === 'no') {
    return make('restart-limits', 'pass', 'Restart=no: systemd never restarts the unit by itself, so no crash loop can form', evidence);
  }
  if (interval === 0 || burst === 0) {
    return make('restart-limits', 'fail', `the start limit is off (StartLimitIntervalSec=${span(interval)}, StartLimitBurst=${burst}): with Restart=${unit.restart} a crash loop never stops`, evidence, advice);
  }
  // The limit trips when burst+1 starts fall inside one interval; consecutive starts are at least RestartSec= apart.
  const fastestLoop = burst * restart;
  evidence.fastestLoop = `${burst} × ${span(restart)} = ${span(fastestLoop)}`;
  if (fastestLoop >= interval) {
    return make('restart-limits', 'fail',
      `${burst + 1} starts can never fall inside StartLimitIntervalSec=${span(interval)}: even back to back they take ${burst} × RestartSec=${span(restart)} = ${span(fastestLoop)}, so a crash loop never stops`,
      evidence, advice);
  }
  if (gateTimeout !== null) {
    const slowestLoop = burst * (restart + gateTimeout);
    evidence.slowestLoop = `${burst} × (${span(restart)} + ${span(gateTimeout)}) = ${span(slowestLoop)}`;
    if (slowestLoop >= interval) {
      return make('restart-limits', 'warn',
        `a crash loop whose starts each wait the gate's full --timeout ${span(gateTimeout)} takes ${burst} × (${span(restart)} + ${span(gateTimeout)}) = ${span(slowestLoop)}, longer than StartLimitIntervalSec=${span(interval)}: that loop never stops`,
        evidence, advice);
    }
  }
  return make('restart-limits', 'pass', `${burst + 1} starts within ${span(interval)} stop a crash loop (RestartSec=${span(restart)})`, evidence);
}

function startTimeoutCheck(unit: UnitProperties, gate: UnitGate | null, make: Make): DoctorCheck {
  const timeout = unit.timeoutStartUsec;
  const gateTimeout = gateTimeoutUsec(gate);
  const evidence: Record<string, unknown> = { timeoutStartSec: span(timeout), ...(gateTimeout === null ? {} : { gateTimeout: span(gateTimeout) }) };
  if (gate === null || gateTimeout === null) return make('start-timeout', 'pass', 'no gate to compare TimeoutStartSec= with', evidence);
  if (gate.setting === 'ExecStart' && unit.type !== 'notify' && unit.type !== 'notify-reload' && unit.type !== 'forking') {
    evidence.type = unit.type;
    return make('start-timeout', 'pass', `Type=${unit.type}: the start completes when the wrapper runs, so TimeoutStartSec= does not cut its wait`, evidence);
  }
  const advice = `set TimeoutStartSec= at least ${span(TIMEOUT_ROOM_USEC)} above the gate's --timeout (e.g. TimeoutStartSec=${Math.ceil((gateTimeout + 60e6) / 1e6)})`;
  if (timeout === Infinity) return make('start-timeout', 'pass', `TimeoutStartSec=infinity: the gate's own --timeout ${span(gateTimeout)} bounds the wait`, evidence);
  if (timeout <= gateTimeout) {
    return make('start-timeout', 'fail',
      `TimeoutStartSec=${span(timeout)} is not above the gate's --timeout ${span(gateTimeout)}: systemd kills gpugate before it can time out and explain why`, evidence, advice);
  }
  if (timeout - gateTimeout < TIMEOUT_ROOM_USEC) {
    return make('start-timeout', 'warn',
      `TimeoutStartSec=${span(timeout)} leaves only ${span(timeout - gateTimeout)} after the gate's --timeout ${span(gateTimeout)} for gpugate's start-up and the other ExecStartPre= lines`, evidence, advice);
  }
  return make('start-timeout', 'pass', `TimeoutStartSec=${span(timeout)} is above the gate's --timeout ${span(gateTimeout)}`, evidence);
}

function notifyAccessCheck(unit: UnitProperties, gate: UnitGate | null, make: Make): DoctorCheck {
  const access = unit.notifyAccess;
  const evidence: Record<string, unknown> = { notifyAccess: access, ...(gate === null ? {} : { gateNotify: gate.settings?.notify ?? false, setting: gate.setting }) };
  if (gate === null || gate.settings?.notify !== true) {
    return make('notify-access', 'pass', 'the gate sends no STATUS= (no --notify), so NotifyAccess= does not matter to it', evidence);
  }
  const advice = 'set NotifyAccess=exec (or all), and start gpugate directly (not through npx or a shell)';
  if (gate.setting === 'ExecStart' && gate.direct && access !== 'none') {
    return make('notify-access', 'pass', `NotifyAccess=${access}: gpugate is the main process and may send STATUS=`, evidence);
  }
  if (access === 'none' || access === 'main') {
    return make('notify-access', 'warn',
      `NotifyAccess=${access}: systemd drops the STATUS= lines that gpugate's --notify sends from ${gate.setting}=, so systemctl status cannot show what the start waits for`,
      evidence, advice);
  }
  if (access === 'exec' && !gate.direct) {
    evidence.command = gate.command.argv.join(' ');
    return make('notify-access', 'warn',
      `NotifyAccess=exec accepts only the ${gate.setting}= process itself, but ${gate.command.argv[0] ?? '?'} starts gpugate as a child: its STATUS= lines are dropped`, evidence, advice);
  }
  return make('notify-access', 'pass', `NotifyAccess=${access}: gpugate's STATUS= lines reach systemctl status`, evidence);
}

function killModeCheck(unit: UnitProperties, gate: UnitGate | null, make: Make): DoctorCheck {
  const mode = unit.killMode;
  const killStale = gate?.settings?.killStale === true;
  const evidence = { killMode: mode, gateKillStale: killStale };
  if (mode === 'control-group') return make('kill-mode', 'pass', 'KillMode=control-group: a stop kills every process of the unit, orphaned workers included', evidence);
  if (mode === 'mixed') return make('kill-mode', 'pass', 'KillMode=mixed: the main process gets SIGTERM, then every process left in the unit gets SIGKILL', evidence);
  if (killStale) {
    return make('kill-mode', 'pass', `KillMode=${mode}: processes of an earlier attempt survive a stop, and the gate's --kill-stale stops them before the next start`, evidence);
  }
  return make('kill-mode', 'warn',
    `KillMode=${mode}: workers of a stopped or crashed attempt survive in the unit and keep their GPU memory; the gate then waits for them until its --timeout`,
    evidence, 'use KillMode=control-group (the default), or add --kill-stale to the gpugate wait line');
}

function memoryFractionCheck(unit: UnitProperties, gate: UnitGate | null, make: Make): DoctorCheck {
  const found = findMemoryUtilization(unit);
  const minFree = gate?.settings?.minFree;
  const engine = gate?.settings?.engine ?? null;
  const evidence: Record<string, unknown> = {
    gpuMemoryUtilization: found?.text ?? null,
    gateMinFree: minFree === undefined ? null : 'fraction' in minFree ? minFree.fraction : `${minFree.bytes} bytes`,
    ...(engine !== null ? { gateEngine: engine } : {}),
  };
  if (found === null) return make('memory-fraction', 'pass', 'no --gpu-memory-utilization in ExecStart= to compare with', evidence);
  if (found.fraction === null) {
    return make('memory-fraction', 'warn', `--gpu-memory-utilization ${found.text} in ExecStart= is not a fraction gpugate can read (a variable is only known when the unit runs)`,
      evidence, 'write the fraction in ExecStart=, or check by hand that the gate\'s --min-free is at least it');
  }
  const advice = `give the gate --for vllm --min-free ${found.fraction} (vLLM needs free ≥ ${found.fraction} × total, as CUDA counts them)`;
  if (gate === null || gate.settings === null) return make('memory-fraction', 'pass', 'no gate to compare --gpu-memory-utilization with', evidence);
  if (minFree === undefined) {
    return make('memory-fraction', 'warn', `the gate has no --min-free: it waits for its default criterion, not for the ${found.fraction} × total that vLLM's --gpu-memory-utilization needs free`, evidence, advice);
  }
  if (!('fraction' in minFree)) {
    return make('memory-fraction', 'warn', `the gate's --min-free is a size; vLLM needs a fraction (${found.fraction}) of each GPU's total free, which depends on the GPU`, evidence, advice);
  }
  if (minFree.fraction < found.fraction) {
    return make('memory-fraction', 'fail',
      `the gate's --min-free ${minFree.fraction} is below --gpu-memory-utilization ${found.fraction}: the gate can pass while vLLM then fails its own check (free < ${found.fraction} × total)`, evidence, advice);
  }
  if (minFree.fraction - found.fraction > FRACTION_SLACK) {
    return make('memory-fraction', 'warn',
      `the gate's --min-free ${minFree.fraction} asks for more than vLLM's ${found.fraction}: it waits for memory the service will not use (and forever while another tenant holds it)`, evidence, advice);
  }
  if (engine !== null) {
    return make('memory-fraction', 'pass', `the gate's --for ${engine} --min-free ${minFree.fraction} checks --gpu-memory-utilization ${found.fraction} as vLLM does (total less reserved, free less its CUDA context)`, evidence);
  }
  return make('memory-fraction', 'pass', `the gate's --min-free ${minFree.fraction} covers --gpu-memory-utilization ${found.fraction} (as a fraction of NVML's total; --for vllm checks it as vLLM does)`, evidence);
}

function gatePassableCheck(unit: UnitProperties, gate: UnitGate | null, gpus: readonly GpuSize[], make: Make): DoctorCheck {
  const minFree = gate?.settings?.minFree;
  const marginBytes = gate?.settings?.marginBytes ?? 0;
  const sizes = gpus.map((g) => ({ index: g.index, total: formatBytes(g.totalBytes), reserved: g.reservedBytes === null ? null : formatBytes(g.reservedBytes) }));
  const evidence: Record<string, unknown> = { gpus: sizes, idleBaseline: formatBytes(IDLE_BASELINE_BYTES) };
  if (gate === null || gate.settings === null || minFree === undefined) return make('gate-passable', 'pass', 'the gate sets no --min-free that an idle GPU could fall short of', evidence);
  evidence.gateMinFree = 'fraction' in minFree ? minFree.fraction : formatBytes(minFree.bytes);
  if (gate.settings.engine !== undefined) evidence.gateEngine = gate.settings.engine;
  evidence.gateMargin = formatBytes(marginBytes);
  // The gate's criterion as it judges it: with --for vllm, vLLM's own check (context included).
  const criterion = minFreeOf(minFree, gate.settings.engine);
  const named = `${gate.settings.engine === undefined ? '' : `--for ${gate.settings.engine} `}--min-free ${String(evidence.gateMinFree)}`;
  const short = idleShortfall(criterion, marginBytes, gpus);
  if (short === null) return make('gate-passable', 'pass', `an idle GPU of this host can pass the gate's ${named} plus --margin ${formatBytes(marginBytes)}`, evidence);
  const reserved = short.gpu.reservedBytes ?? UNKNOWN_RESERVED_BYTES;
  Object.assign(evidence, { gpu: short.gpu.index, needed: formatBytes(short.neededBytes), idleFree: formatBytes(short.idleFreeBytes) });
  const room = 'fraction' in minFree ? largestIdleMarginBytes(criterion, gpus) : -1;
  const advice = room >= 0
    ? `lower the gate's --margin to ${formatBytes(room)} or less (gpugate systemd --unit ${unit.name} --write fits it)`
    : 'lower --min-free (and the service\'s --gpu-memory-utilization): even with no margin an idle GPU cannot offer it';
  return make('gate-passable', 'fail',
    `the gate needs ${formatBytes(short.neededBytes)} free on GPU ${short.gpu.index}, but idle it offers only ${formatBytes(short.idleFreeBytes)} (total ${formatBytes(short.gpu.totalBytes)} − reserved ${formatBytes(reserved)} − ${formatBytes(IDLE_BASELINE_BYTES)} in use at idle): every start of the unit fails, even on an idle GPU`,
    evidence, advice);
}
