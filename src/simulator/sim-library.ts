/**
 * Finds gpugate's NVML simulator library (the file that `gpugate demo`, the tests and users' own
 * tooling pass as GPUGATE_NVML_LIBRARY). It is searched where the addon is: GPUGATE_PREBUILD's
 * build/Release when that is set, else a local build (build/Release, build/Debug) unless
 * PREBUILDS_ONLY is set, then the prebuilds/<platform>-<arch>/ directory shipped in the package.
 *
 * There is one library per driver profile (sim/driver_profiles.h): each exports exactly the NVML
 * symbols of its driver branch, and serves only scenarios of that branch. findSimLibraryFor()
 * picks the one a scenario needs.
 */

import * as fs from 'node:fs';
import * as path from 'node:path';
import { ErrorCode, GpugateError } from '../gpugate-error';
import { ConfigError } from '../config-error';
import { PACKAGE_ROOT } from '../package-root';

/** The simulator libraries gpugate builds: gpugate_sim (the current driver), gpugate_sim_<profile>. */
export type SimLibraryName = 'gpugate_sim' | `gpugate_sim_${string}`;

/** One row of the driver profile table. */
export interface SimDriverProfile {
  /** The name scenarios use ("r535-early"). */
  name: string;
  /** The lowest driver version it stands for, as major * 1000 + minor. */
  firstDriver: number;
  /** Bytes per entry its _v3 process lists write (0: it has no _v3). */
  v3EntryBytes: number;
  /** The library built for it. */
  library: SimLibraryName;
  /** The NVML symbols that library exports. */
  symbols: string[];
}

interface ProfileTableModule {
  readProfileTable(file?: string): {
    profiles: Array<{ token: string; name: string; firstDriver: number; v3EntryBytes: number }>;
    symbols: Array<{ name: string; firstDriver: number; stub: boolean }>;
  };
  exportedSymbols(token: string): string[];
}

/** The driver profiles, oldest first, read from the package's sim/driver_profiles.h. */
export function simDriverProfiles(packageRoot: string = PACKAGE_ROOT): SimDriverProfile[] {
  const table = require(path.join(path.resolve(packageRoot), 'sim', 'profile-table.cjs')) as ProfileTableModule;
  return table.readProfileTable().profiles.map((p) => ({
    name: p.name,
    firstDriver: p.firstDriver,
    v3EntryBytes: p.v3EntryBytes,
    library: p.token === 'current' ? 'gpugate_sim' : `gpugate_sim_${p.token}`,
    symbols: table.exportedSymbols(p.token),
  }));
}

/**
 * The profile a scenario file declares: its system.driverProfile, else the profile of its
 * system.driverVersion (default 580.95.05, the current driver).
 * @throws ConfigError naming the file when it cannot be read or names no known profile
 */
export function simProfileForScenario(scenarioPath: string, packageRoot?: string): SimDriverProfile {
  const profiles = simDriverProfiles(packageRoot);
  let system: { driverProfile?: unknown; driverVersion?: unknown } = {};
  try {
    const parsed = JSON.parse(fs.readFileSync(scenarioPath, 'utf8')) as { system?: typeof system };
    system = parsed.system ?? {};
  } catch (error) {
    throw new ConfigError('scenario', `${scenarioPath}: cannot read the scenario (${error instanceof Error ? error.message : String(error)})`);
  }
  if (system.driverProfile !== undefined) {
    const named = profiles.find((p) => p.name === system.driverProfile);
    if (named === undefined) {
      throw new ConfigError('scenario', `${scenarioPath}: expected one of ${profiles.map((p) => p.name).join(', ')} for system.driverProfile, found ${JSON.stringify(system.driverProfile)}`);
    }
    return named;
  }
  const version = system.driverVersion ?? '580.95.05';
  // The leading MAJOR.MINOR decides, as in the simulator (sim/symbols.cc).
  const match = typeof version === 'string' ? /^(\d+)\.(\d{1,3})(?!\d)/.exec(version) : null;
  if (match === null) throw new ConfigError('scenario', `${scenarioPath}: expected a driver version starting MAJOR.MINOR for system.driverVersion, or a system.driverProfile; found ${JSON.stringify(version)}`);
  const key = Number(match[1]) * 1000 + Number(match[2]);
  return profiles.filter((p) => p.firstDriver <= key).at(-1) ?? profiles[0]!;
}

/** The simulator library that serves the scenario at `scenarioPath` (see simProfileForScenario). */
export function findSimLibraryFor(scenarioPath: string, options: Omit<FindSimLibraryOptions, 'name'> = {}): string {
  return findSimLibrary({ ...options, name: simProfileForScenario(scenarioPath, options.packageRoot).library });
}

/** Options for `findSimLibrary`. */
export interface FindSimLibraryOptions {
  /** Which simulator: gpugate_sim (the current driver, default) or gpugate_sim_<profile>. */
  name?: SimLibraryName;
  /** gpugate's package root (default: the directory above this module's). */
  packageRoot?: string;
}

/** Thrown when the simulator library is in none of the places searched. */
export class SimLibraryNotFoundError extends GpugateError {
  override readonly name = 'SimLibraryNotFoundError';
  declare readonly code: typeof ErrorCode.simLibraryNotFound;
  /** Every path that was tried, in order. */
  readonly tried: string[];

  constructor(name: string, tried: string[], options?: ErrorOptions) {
    super(
      ErrorCode.simLibraryNotFound,
      `gpugate: the simulator library ${name}.so was not found; tried:\n` +
        tried.map((p) => `  ${p}`).join('\n') +
        '\nBuild it with `npx node-gyp rebuild` (or `npm run build:cmake`), or install a package with prebuilds.',
      options,
    );
    this.tried = tried;
  }
}

/** Every path the simulator library is looked for at, in search order. */
export function simLibraryCandidates(options: FindSimLibraryOptions = {}): string[] {
  const file = `${options.name ?? 'gpugate_sim'}.so`;
  const root = path.resolve(options.packageRoot ?? PACKAGE_ROOT);
  const candidates: string[] = [];
  const override = process.env['GPUGATE_PREBUILD'];
  const base = override ? path.resolve(override) : root;
  if (!process.env['PREBUILDS_ONLY']) {
    candidates.push(path.join(base, 'build', 'Release', file), path.join(base, 'build', 'Debug', file));
  }
  const platform = process.env['npm_config_platform'] ?? process.platform;
  const arch = process.env['npm_config_arch'] ?? process.arch;
  candidates.push(path.join(base, 'prebuilds', `${platform}-${arch}`, file));
  return candidates;
}

/**
 * The absolute path of the simulator library.
 * @throws SimLibraryNotFoundError listing every path tried
 */
export function findSimLibrary(options: FindSimLibraryOptions = {}): string {
  const candidates = simLibraryCandidates(options);
  const found = candidates.find((p) => fs.existsSync(p));
  if (found === undefined) throw new SimLibraryNotFoundError(options.name ?? 'gpugate_sim', candidates);
  return found;
}
