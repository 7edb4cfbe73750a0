/**
 * The error raised when no native build of gpugate's addon matches this machine: it names the
 * platform, architecture, libc, Node and N-API versions and every place that was searched, so a
 * user can tell at once whether to rebuild, install a prebuild for another platform, or point
 * GPUGATE_PREBUILD somewhere else. Any other load failure (a binary that exists but cannot be
 * loaded) is passed through unchanged by `explainNativeLoadFailure`.
 */

import * as fs from 'node:fs';
import * as path from 'node:path';
import { ErrorCode, GpugateError } from '../gpugate-error';

/** The N-API version gpugate's addon is built for (binding.gyp's NAPI_VERSION; package.json binary.napi_versions). */
export const REQUIRED_NAPI_VERSION = 8;

/** One place that was searched for the addon, and what was found there. */
export interface NativeSearchPlace {
  /** Absolute directory that was searched. */
  dir: string;
  /** What that directory held, in words (e.g. "no such directory", "no *.node file"). */
  found: string;
}

/** What this machine and runtime are, as the binary lookup sees them. */
export interface NativeRuntimeInfo {
  platform: string;
  arch: string;
  /** e.g. "glibc 2.36" or "musl". */
  libc: string;
  nodeVersion: string;
  /** process.versions.napi, or null when the runtime does not say. */
  napiVersion: number | null;
}

/** Thrown when no native build of the gpugate addon matches this machine. `instanceof` works. */
export class NativeLoadError extends GpugateError {
  override readonly name = 'NativeLoadError';
  declare readonly code: typeof ErrorCode.noNativeBuild;
  readonly runtime: NativeRuntimeInfo;
  /** Every place that was searched, in search order. */
  readonly searched: NativeSearchPlace[];

  constructor(runtime: NativeRuntimeInfo, searched: NativeSearchPlace[], cause: unknown) {
    super(ErrorCode.noNativeBuild, formatMessage(runtime, searched), { cause });
    this.runtime = runtime;
    this.searched = searched;
  }
}

/** Describes the runtime the way the binary lookup matches it. */
export function describeNativeRuntime(): NativeRuntimeInfo {
  const napi = Number(process.versions.napi);
  return {
    platform: process.env['npm_config_platform'] ?? process.platform,
    arch: process.env['npm_config_arch'] ?? process.arch,
    libc: detectLibc(),
    nodeVersion: process.versions.node,
    napiVersion: Number.isFinite(napi) && napi > 0 ? napi : null,
  };
}

/**
 * Turns a failure of `node-gyp-build(packageRoot)` into the error to show: a NativeLoadError when
 * no binary matched, the original error (unchanged, same object) for anything else.
 */
export function explainNativeLoadFailure(err: unknown, packageRoot: string): unknown {
  if (!(err instanceof Error) || !/^No native build was found/.test(err.message)) return err;
  const runtime = describeNativeRuntime();
  return new NativeLoadError(runtime, searchedPlaces(packageRoot, runtime), err);
}

/** The places node-gyp-build searches, in its order, with what each holds. */
export function searchedPlaces(packageRoot: string, runtime: NativeRuntimeInfo): NativeSearchPlace[] {
  let root = path.resolve(packageRoot);
  const places: NativeSearchPlace[] = [];
  const override = process.env['GPUGATE_PREBUILD'];
  if (override) root = path.resolve(override);
  if (!process.env['PREBUILDS_ONLY']) {
    for (const sub of ['build/Release', 'build/Debug']) {
      const dir = path.join(root, sub);
      places.push({ dir, found: describeBuildDir(dir) });
    }
  } else {
    places.push({ dir: path.join(root, 'build'), found: 'skipped (PREBUILDS_ONLY is set)' });
  }
  const tuple = `${runtime.platform}-${runtime.arch}`;
  for (const base of [root, path.dirname(process.execPath)]) {
    const prebuilds = path.join(base, 'prebuilds');
    const dir = path.join(prebuilds, tuple);
    places.push({ dir, found: describePrebuildDir(dir, prebuilds) });
  }
  return places;
}

function describeBuildDir(dir: string): string {
  const entries = readDir(dir);
  if (entries === null) return 'no such directory';
  return entries.some((f) => f.endsWith('.node')) ? 'has a *.node file' : 'no *.node file';
}

function describePrebuildDir(dir: string, prebuilds: string): string {
  const entries = readDir(dir);
  if (entries !== null) {
    const binaries = entries.filter((f) => f.endsWith('.node'));
    return binaries.length > 0
      ? `holds ${binaries.join(', ')}, none built for this runtime`
      : 'no *.node file';
  }
  const others = readDir(prebuilds);
  if (others === null || others.length === 0) return 'no such directory';
  return `no such directory (prebuilds exist for: ${others.sort().join(', ')})`;
}

function readDir(dir: string): string[] | null {
  try {
    return fs.readdirSync(dir);
  } catch {
    return null;
  }
}

function detectLibc(): string {
  if (process.env['LIBC']) return process.env['LIBC'];
  if (process.platform !== 'linux') return 'n/a';
  try {
    const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
    const glibc = report?.header?.glibcVersionRuntime;
    if (glibc) return `glibc ${glibc}`;
  } catch {
    // fall through to the musl check
  }
  return fs.existsSync('/etc/alpine-release') ? 'musl' : 'unknown (not glibc)';
}

function formatMessage(runtime: NativeRuntimeInfo, searched: NativeSearchPlace[]): string {
  const napi = runtime.napiVersion === null ? 'unknown' : String(runtime.napiVersion);
  const lines = [
    'gpugate: no native build of the addon matches this machine.',
    `  platform ${runtime.platform}, arch ${runtime.arch}, libc ${runtime.libc}, ` +
      `Node ${runtime.nodeVersion}, N-API ${napi} (gpugate needs N-API ${REQUIRED_NAPI_VERSION} or newer)`,
    '  searched:',
    ...searched.map((p) => `    ${p.dir}: ${p.found}`),
    '  Prebuilt binaries ship for linux-x64. Elsewhere, build from source in the package directory',
    '  (`npm rebuild gpugate`, needs python3, make and a C++17 compiler), or set GPUGATE_PREBUILD',
    '  to a directory whose build/Release holds gpugate.node.',
  ];
  return lines.join('\n');
}
