/**
 * A simulated GPU host that several programs can watch at once: the scenario is written to a
 * temporary folder anchored to one wall-clock start ("startedAt"), so every reader sees the same
 * phase at the same moment; processes that ask for it (`"spawn": {"comm": ...}`) get a real
 * stand-in process whose pid the scenario then lists, which ends when the timeline drops that
 * process; and the simulator library of the scenario's driver profile is linked in the folder as
 * libnvidia-ml.so.1 for LD_LIBRARY_PATH. `gpugate sim` and `gpugate demo` run one.
 */

import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { SimHolder } from './sim-holder';
import { findSimLibraryFor, simProfileForScenario, type SimDriverProfile } from './sim-library';
import { ConfigError } from '../config-error';

/** How to start a simulated host. */
export interface SimulatedHostOptions {
  /** The scenario: a parsed object, or the path of a JSON file. */
  scenario: object | string;
  /** The timeline's 0 ms, as Unix milliseconds (default: now). */
  startedAt?: number;
  /** Prefix of the temporary folder's name (default "gpugate-simhost-"). */
  folderPrefix?: string;
  /** File name of the written scenario (default: the source's, or "scenario.json"). */
  fileName?: string;
  /** Called when a holder is ended because the timeline no longer lists its process. */
  onHolderExit?: (holder: SimHostHolder) => void;
  /** gpugate's package root, to find the simulator libraries (default: this package). */
  packageRoot?: string;
}

/** A real process bound to a scenario process. */
export interface SimHostHolder {
  pid: number;
  comm: string;
  /** When (ms after startedAt) the timeline drops its process and the holder ends; null: never. */
  exitAtMs: number | null;
}

interface ScenarioProcess {
  pid?: unknown;
  spawn?: { comm?: unknown };
  name?: unknown;
}

interface ScenarioMigDevice {
  slot?: unknown;
  processes?: ScenarioProcess[];
}

interface TimelineEntry {
  atMs?: unknown;
  device?: unknown;
  set?: { processes?: ScenarioProcess[]; migDevices?: ScenarioMigDevice[] };
}

interface ScenarioObject {
  devices?: Array<{ processes?: ScenarioProcess[]; migDevices?: ScenarioMigDevice[] }>;
  timeline?: TimelineEntry[];
  startedAt?: unknown;
}

interface SimHostFields {
  folder: string;
  scenarioPath: string;
  libraryPath: string;
  libraryDir: string;
  profile: SimDriverProfile;
  startedAt: number;
  holders: SimHostHolder[];
  running: SimHolder[];
}

/** A running simulated host; stop() ends its holders and removes its folder. */
export class SimulatedHost {
  readonly folder: string;
  readonly scenarioPath: string;
  readonly libraryPath: string;
  /** The folder holding libnvidia-ml.so.1 (for LD_LIBRARY_PATH). */
  readonly libraryDir: string;
  readonly profile: SimDriverProfile;
  readonly startedAt: number;
  readonly holders: SimHostHolder[];
  private readonly running: SimHolder[];
  private readonly timers: NodeJS.Timeout[] = [];

  private constructor(fields: SimHostFields) {
    this.folder = fields.folder;
    this.scenarioPath = fields.scenarioPath;
    this.libraryPath = fields.libraryPath;
    this.libraryDir = fields.libraryDir;
    this.profile = fields.profile;
    this.startedAt = fields.startedAt;
    this.holders = fields.holders;
    this.running = fields.running;
  }

  /**
   * Write the anchored scenario, start its holders, schedule their exits.
   * @throws ConfigError naming the scenario when it cannot be read, SimLibraryNotFoundError when the library for its profile is not built
   */
  static start(options: SimulatedHostOptions): SimulatedHost {
    const source = typeof options.scenario === 'string' ? options.scenario : null;
    let scenario: ScenarioObject;
    try {
      scenario = (source === null ? structuredClone(options.scenario) : JSON.parse(readFileSync(source, 'utf8'))) as ScenarioObject;
    } catch (error) {
      throw new ConfigError('scenario', `${source ?? 'the scenario'}: cannot read it (${error instanceof Error ? error.message : String(error)})`);
    }
    const startedAt = options.startedAt ?? Date.now();
    const folder = mkdtempSync(join(tmpdir(), options.folderPrefix ?? 'gpugate-simhost-'));
    const running: SimHolder[] = [];
    try {
      const binDir = join(folder, 'bin');
      mkdirSync(binDir);
      const byKey = new Map<string, SimHolder>();
      for (const { holderKey, process } of spawnedProcesses(scenario)) {
        const comm = process.spawn?.comm;
        if (typeof comm !== 'string') throw new ConfigError('scenario', `${source ?? 'the scenario'}: expected "spawn": {"comm": "NAME"} in a process, found ${JSON.stringify(process.spawn)}`);
        let holder = byKey.get(holderKey);
        if (holder === undefined) {
          holder = SimHolder.start(comm, binDir);
          byKey.set(holderKey, holder);
          running.push(holder);
        }
        process.pid = holder.pid;
        process.name ??= comm;
      }
      scenario.startedAt = new Date(startedAt).toISOString();
      const scenarioPath = join(folder, options.fileName ?? (source === null ? 'scenario.json' : basename(source)));
      writeFileSync(scenarioPath, `${JSON.stringify(scenario, null, 2)}\n`);
      const profile = simProfileForScenario(scenarioPath, options.packageRoot);
      const libraryPath = findSimLibraryFor(scenarioPath, options.packageRoot === undefined ? {} : { packageRoot: options.packageRoot });
      const libraryDir = join(folder, 'lib');
      mkdirSync(libraryDir);
      symlinkSync(libraryPath, join(libraryDir, 'libnvidia-ml.so.1'));
      const exits = exitTimes(scenario, new Set(running.map((h) => h.pid)));
      const holders = running.map((h) => ({ pid: h.pid, comm: h.title, exitAtMs: exits.get(h.pid) ?? null }));
      const host = new SimulatedHost({ folder, scenarioPath, libraryPath, libraryDir, profile, startedAt, holders, running });
      for (const [i, holder] of holders.entries()) {
        if (holder.exitAtMs === null) continue;
        const timer = setTimeout(() => {
          running[i]!.stop();
          options.onHolderExit?.(holder);
        }, Math.max(0, startedAt + holder.exitAtMs - Date.now()));
        timer.unref();
        host.timers.push(timer);
      }
      return host;
    } catch (error) {
      for (const holder of running) holder.stop();
      rmSync(folder, { recursive: true, force: true });
      throw error;
    }
  }

  /** The variables a reader of this host needs (LD_LIBRARY_PATH put in front of `base`'s). */
  env(base: NodeJS.ProcessEnv = process.env): Record<string, string> {
    const inherited = base['LD_LIBRARY_PATH'];
    return {
      GPUGATE_SIM_SCENARIO: this.scenarioPath,
      GPUGATE_NVML_LIBRARY: this.libraryPath,
      LD_LIBRARY_PATH: inherited ? `${this.libraryDir}:${inherited}` : this.libraryDir,
    };
  }

  /** End every holder still running and remove the folder. Safe to call more than once. */
  stop(): void {
    for (const timer of this.timers) clearTimeout(timer);
    for (const holder of this.running) holder.stop();
    rmSync(this.folder, { recursive: true, force: true });
  }
}

/**
 * Every process object (base devices, MIG devices, timeline sets) that asks for a holder, with the
 * holder it names: the n-th process spawned as COMM in a list of one GPU (or one MIG slot) is the
 * same real process wherever that GPU's lists name it, and another process than the (n+1)-th, or
 * than a COMM on another GPU. So same-named holders stay distinct processes, as on a real host.
 */
function spawnedProcesses(scenario: ScenarioObject): Array<{ holderKey: string; process: ScenarioProcess }> {
  const lists: Array<{ scope: string; list: ScenarioProcess[] | undefined }> = [];
  const migLists = (scope: string, migDevices: ScenarioMigDevice[] | undefined): void => {
    for (const [at, mig] of (migDevices ?? []).entries()) lists.push({ scope: `${scope}/mig ${String(mig.slot ?? `#${at}`)}`, list: mig.processes });
  };
  for (const [index, device] of (scenario.devices ?? []).entries()) {
    lists.push({ scope: `gpu ${index}`, list: device.processes });
    migLists(`gpu ${index}`, device.migDevices);
  }
  for (const entry of scenario.timeline ?? []) {
    const scope = typeof entry.device === 'number' ? `gpu ${entry.device}` : `gpu ${String(entry.device)}`;
    lists.push({ scope, list: entry.set?.processes });
    migLists(scope, entry.set?.migDevices);
  }
  const spawned: Array<{ holderKey: string; process: ScenarioProcess }> = [];
  for (const { scope, list } of lists) {
    const seen = new Map<unknown, number>();
    for (const process of Array.isArray(list) ? list : []) {
      if (process === null || typeof process !== 'object' || process.spawn === undefined) continue;
      const comm = process.spawn?.comm;
      const nth = seen.get(comm) ?? 0;
      seen.set(comm, nth + 1);
      spawned.push({ holderKey: JSON.stringify([scope, comm, nth]), process });
    }
  }
  return spawned;
}

/** For each pid, the first atMs after which no device lists it (timeline applied in time order). */
function exitTimes(scenario: ScenarioObject, pids: Set<number>): Map<number, number> {
  const devices = (scenario.devices ?? []).map((d) => ({
    processes: pidsOf(d.processes),
    mig: (d.migDevices ?? []).map((m) => pidsOf(m.processes)),
  }));
  const exits = new Map<number, number>();
  const entries = (scenario.timeline ?? []).filter((e) => typeof e.atMs === 'number');
  entries.sort((a, b) => (a.atMs as number) - (b.atMs as number));
  for (const entry of entries) {
    const targets = entry.device === 'all' ? devices : typeof entry.device === 'number' && devices[entry.device] ? [devices[entry.device]!] : [];
    for (const device of targets) {
      if (entry.set?.processes !== undefined) device.processes = pidsOf(entry.set.processes);
      if (entry.set?.migDevices !== undefined) device.mig = entry.set.migDevices.map((m) => pidsOf(m.processes));
    }
    for (const pid of pids) {
      if (exits.has(pid)) continue;
      const listed = devices.some((d) => d.processes.has(pid) || d.mig.some((m) => m.has(pid)));
      if (!listed) exits.set(pid, entry.atMs as number);
    }
  }
  return exits;
}

function pidsOf(list: ScenarioProcess[] | undefined): Set<number> {
  return new Set((list ?? []).map((p) => p.pid).filter((pid): pid is number => typeof pid === 'number'));
}
