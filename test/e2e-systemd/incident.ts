/**
 * The incident of a crashed vLLM service, replayed under a real systemd (see container.ts) on
 * gpugate's simulator, with the times of the incident divided by SCALE (ratios kept):
 *   - the driver stand-in keeps a dead process's memory (and lists the dead pid) HOLD, then
 *     drains it over DRAIN;
 *   - the vLLM-shaped server loads for LOAD, crashes CRASH_AFTER_READY after it is healthy, and
 *     its worker TP6 outlives the crash, holding ~88 GiB and ignoring SIGTERM for ORPHAN;
 *   - the unit restarts with Restart=on-failure and RestartSec=10 (scaled).
 * A guard is what runs before the server (nothing, the usual nvidia-smi loop, gpugate's line, the
 * shipped drop-in). Every duration in a guard and in the shipped files is divided by SCALE too,
 * and gpugate polls every 500 ms / SCALE.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SystemdContainer } from './container';

export const SCALE = 5;
const GiB = 1024 ** 3;
/** Unscaled times of the incident, in ms. */
export const INCIDENT = { holdMs: 20_000, drainMs: 3_000, loadMs: 4_000, crashAfterReadyMs: 8_000, orphanIgnoreMs: 25_000, restartSec: 10 };
const scaled = (ms: number): number => Math.round(ms / SCALE);

export const repo = join(__dirname, '..', '..');
const bin = join(repo, 'test', 'e2e-systemd', 'bin');

function simDevice(index: number): Record<string, unknown> {
  return {
    uuid: `GPU-e2e00000-0000-4000-8000-${index.toString(16).padStart(12, '0')}`,
    pciBusId: `00000000:${(0x18 + index * 8).toString(16).toUpperCase().padStart(2, '0')}:00.0`,
    minorNumber: index,
    memory: { totalBytes: 97887 * 2 ** 20, reservedBytes: 471 * 2 ** 20, usedBytes: 0 },
  };
}

/** Divide every duration in a unit file or a gpugate command line by SCALE. */
export function scaleDurations(text: string): string {
  const toMs = (value: number, unit: string): number => value * ({ ms: 1, s: 1000, sec: 1000, m: 60_000, min: 60_000 }[unit] ?? 1000);
  return text
    .replace(/(--(?:stable|timeout|kill-grace|interval) )(\d+)(ms|s|m)\b/g, (_all, flag: string, value: string, unit: string) => `${flag}${scaled(toMs(Number(value), unit))}ms`)
    .replace(/^(TimeoutStartSec|TimeoutStopSec|RestartSec|StartLimitIntervalSec)=(\d+)(ms|s|min)?$/gm, (_all, key: string, value: string, unit: string | undefined) => `${key}=${scaled(toMs(Number(value), unit ?? 's'))}ms`)
    .replace(/(gpugate wait )(?![^\n]*--interval)/g, `$1--interval ${scaled(500)}ms `);
}

export type Guard = 'none' | 'seed' | 'line' | 'dropin';

export interface Row {
  name: string;
  guard: Guard;
  /** Extra [Service] lines for the incident's unit. */
  service?: string[];
  /** Lines of a second drop-in applied after the guard's. */
  override?: string;
  /** Unrelated holders: another unit per entry. */
  holders?: Array<{ unit: string; title: string; bytes: number; gpus: number[] }>;
  crashes?: number;
  crashDuringLoad?: boolean;
  /** Stop the unit while its ExecStartPre= gpugate step publishes a STATUS= starting with this. */
  stopWhenStatus?: RegExp;
  /** Give up after this long (scaled ms) from the unit's start. */
  deadlineMs?: number;
  user?: string;
}

export interface RowResult {
  name: string;
  failedStarts: number;
  startLimitHits: number;
  crashes: number;
  /** From the (last) crash to healthy again, in unscaled seconds; null if never. */
  healthyAfterCrashS: number | null;
  /** `systemctl stop` while gpugate worked, in real seconds; null if not tried. */
  stopS: number | null;
  /** Every distinct StatusText systemd showed for the unit. */
  statuses: string[];
  finalState: string;
  journal: string;
  valueErrors: number;
}

interface Event {
  t: number;
  tag: string;
  event: string;
  [key: string]: unknown;
}

function readEvents(file: string): Event[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as Event);
}

const SEED_LOOP = `#!/bin/sh
# The usual guard: every 2 s, ask nvidia-smi whether each GPU uses under 1 GiB; give up after 120 s.
i=0
while [ "$i" -lt 60 ]; do
  if used=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits) &&
    echo "$used" | awk '$1 >= 1024 { busy = 1 } END { exit busy }'; then exit 0; fi
  sleep ${2 / SCALE}
  i=$((i + 1))
done
exit 1
`;

function guardLines(guard: Guard): string[] {
  if (guard === 'seed') return ['ExecStartPre=/usr/local/bin/seed-gpu-wait'];
  if (guard === 'line') return [scaleDurations('ExecStartPre=gpugate wait --min-free 0.9 --margin 2GiB --stable 5s --timeout 240s')];
  return [];
}

/** Boot a container, run one row of the incident, and tear everything down. */
export async function runRow(row: Row, smiBinary: string): Promise<RowResult> {
  const c = new SystemdContainer();
  try {
    const shared = c.shared;
    // Writable by a User= service too (chmod: the umask would narrow a mode given to mkdir).
    for (const dir of ['claims', 'state']) {
      mkdirSync(join(shared, dir));
      chmodSync(join(shared, dir), 0o1777);
    }
    const devices = Array.from({ length: 8 }, (_, i) => simDevice(i));
    writeFileSync(join(shared, 'scenario.json'), `${JSON.stringify({ devices: devices.map((d) => ({ ...d, processes: [] })) })}\n`);
    writeFileSync(join(shared, 'driver.json'), JSON.stringify({ scenario: '/e2e/scenario.json', claims: '/e2e/claims', holdMs: scaled(INCIDENT.holdMs), drainMs: scaled(INCIDENT.drainMs), devices }));
    writeFileSync(join(shared, 'events.jsonl'), '');
    chmodSync(join(shared, 'events.jsonl'), 0o666);
    const plan = {
      tag: 'vllm',
      gpus: 8,
      utilization: 0.9,
      bytesPerGpu: 88 * GiB,
      loadMs: scaled(INCIDENT.loadMs),
      crashes: row.crashes ?? 1,
      crashAfterReadyMs: scaled(INCIDENT.crashAfterReadyMs),
      crashDuringLoad: row.crashDuringLoad ?? false,
      orphanTp: 6,
      orphanIgnoreMs: scaled(INCIDENT.orphanIgnoreMs),
      notify: (row.service ?? []).includes('Type=notify'),
      events: '/e2e/events.jsonl',
      claims: '/e2e/claims',
      state: '/e2e/state',
      gpugate: repo,
    };
    writeFileSync(join(shared, 'vllm-plan.json'), JSON.stringify(plan));

    c.addFile('/etc/systemd/system.conf.d/e2e.conf', `[Manager]\nShowStatus=no\nDefaultEnvironment=GPUGATE_SIM_SCENARIO=/e2e/scenario.json GPUGATE_NVML_LIBRARY=${join(repo, 'build', 'Release', 'gpugate_sim.so')}\n`);
    c.addFile('/etc/systemd/system/gpugate-e2e.target', '[Unit]\nDescription=gpugate end-to-end suite\nRequires=sysinit.target\nAfter=sysinit.target\n');
    c.addFile('/etc/systemd/system/gpu-driver.service', `[Unit]\nDescription=NVIDIA driver stand-in\n\n[Service]\nExecStart=/usr/bin/node ${join(bin, 'gpu-driver.cjs')} /e2e/driver.json\n`);
    c.addSymlink('/usr/local/bin/gpugate', join(repo, 'dist', 'cli', 'main.js'));
    // The command's shebang (`env -S node --disable-sigusr1`) finds `node` on the manager's PATH,
    // where /usr/local/bin comes first: the Node this suite runs on, which the host's may not be.
    c.addSymlink('/usr/local/bin/node', process.execPath);
    c.addCopy('/usr/local/bin/nvidia-smi', smiBinary);
    c.addFile('/usr/local/bin/seed-gpu-wait', SEED_LOOP, 0o755);
    for (const holder of row.holders ?? []) {
      c.addFile(`/etc/systemd/system/${holder.unit}`, `[Unit]\nDescription=an unrelated GPU user\n\n[Service]\nExecStart=/usr/bin/node ${join(bin, 'holder.cjs')} /e2e/claims ${holder.title} ${holder.bytes} ${holder.gpus.join(',')}\n`);
    }
    const service = [
      '[Unit]',
      'Description=vLLM (the incident\'s unit)',
      '',
      '[Service]',
      `Environment=E2E_VLLM_PLAN=/e2e/vllm-plan.json`,
      ...guardLines(row.guard),
      `ExecStart=/usr/bin/node ${join(bin, 'fake-vllm.cjs')} api`,
      'Restart=on-failure',
      `RestartSec=${scaled(INCIDENT.restartSec * 1000)}ms`,
      ...(row.user !== undefined ? [`User=${row.user}`] : []),
      ...(row.service ?? []),
      '',
    ];
    c.addFile('/etc/systemd/system/vllm.service', service.join('\n'));
    if (row.guard === 'dropin') c.addFile('/etc/systemd/system/vllm.service.d/gpugate-wait.conf', scaleDurations(readFileSync(join(repo, 'contrib', 'systemd', 'gpugate-wait.conf'), 'utf8')));
    if (row.override !== undefined) c.addFile('/etc/systemd/system/vllm.service.d/zz-row.conf', scaleDurations(row.override));

    await c.boot(join(repo, 'test', 'e2e-systemd', 'boot-container.sh'));
    const started = c.systemctl('start', 'gpu-driver.service', ...(row.holders ?? []).map((h) => h.unit));
    if (started.status !== 0) throw new Error(`cannot start the driver stand-in: ${started.stderr}`);
    await sleep(400);
    const begin = Date.now();
    c.systemctl('start', '--no-block', 'vllm.service');

    const statuses: string[] = [];
    const eventsFile = join(shared, 'events.jsonl');
    const crashes = plan.crashes;
    const deadline = begin + (row.deadlineMs ?? 60_000);
    let stopS: number | null = null;
    let finalState = '';
    while (Date.now() < deadline) {
      const props = c.show('vllm.service', 'StatusText', 'ActiveState', 'SubState', 'Result');
      const status = props.StatusText ?? '';
      if (status !== '' && statuses[statuses.length - 1] !== status) statuses.push(status);
      finalState = `${props.ActiveState}/${props.SubState}/${props.Result}`;
      const events = readEvents(eventsFile);
      const crashEvents = events.filter((e) => e.event === 'crash');
      if (row.stopWhenStatus !== undefined && crashEvents.length >= crashes && props.SubState === 'start-pre' && row.stopWhenStatus.test(status)) {
        const t0 = process.hrtime.bigint();
        c.systemctl('stop', 'vllm.service');
        stopS = Number(process.hrtime.bigint() - t0) / 1e9;
        const after = c.show('vllm.service', 'ActiveState', 'SubState', 'Result');
        finalState = `${after.ActiveState}/${after.SubState}/${after.Result}`;
        break;
      }
      const lastCrash = crashEvents[crashes - 1];
      if (lastCrash !== undefined && events.some((e) => e.event === 'healthy' && e.t > lastCrash.t)) break;
      if (props.ActiveState === 'failed' && props.SubState === 'failed') break;
      await sleep(100);
    }
    await sleep(200);
    const props = c.show('vllm.service', 'StatusText');
    if ((props.StatusText ?? '') !== statuses[statuses.length - 1]) statuses.push(props.StatusText ?? '');
    const journal = c.journal('vllm.service');
    const events = readEvents(eventsFile);
    const crashEvents = events.filter((e) => e.event === 'crash');
    const lastCrash = crashEvents[crashEvents.length - 1];
    const healthy = lastCrash === undefined ? undefined : events.find((e) => e.event === 'healthy' && e.t > lastCrash.t);
    // systemd 252 logs one "Failed with result" per failed run, and one more when the start limit
    // refuses a restart; the planned crashes are runs that failed after being healthy.
    const failures = (journal.match(/vllm\.service: Failed with result/g) ?? []).length;
    const startLimitHits = (journal.match(/vllm\.service: Start request repeated too quickly/g) ?? []).length;
    return {
      name: row.name,
      failedStarts: Math.max(0, failures - crashEvents.length - startLimitHits),
      startLimitHits,
      crashes: crashEvents.length,
      healthyAfterCrashS: healthy === undefined || lastCrash === undefined ? null : ((healthy.t - lastCrash.t) * SCALE) / 1000,
      stopS,
      statuses,
      finalState,
      journal,
      valueErrors: events.filter((e) => e.event === 'valueerror').length,
    };
  } finally {
    await c.close();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
