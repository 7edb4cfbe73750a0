/**
 * Which program the generated `ExecStartPre=` line starts. The recommended, stable form is the
 * installed `gpugate` command (`npm install -g gpugate`: /usr/local/bin/gpugate, or /usr/bin with a
 * distribution's Node), whose shebang starts a Node found on the service's PATH with
 * --disable-sigusr1. It survives an upgrade and every `npm ci` of a project. Where no such command
 * (or no Node new enough for its shebang) is there, the line names a Node and main.js by absolute
 * path instead, and each of those paths that a service should not depend on is reported.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, lstatSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join, sep } from 'node:path';
import { nodeScriptArgv } from '../host/systemd-exec-line';
import { servicePathDirs, unstableLocation } from '../host/service-location';
import { PACKAGE_ROOT } from '../package-root';
import { unsupportedNode } from './node-requirement';
import type { GateProgram } from './systemd-drop-in';

/** The command's name on the system path (package.json `bin`). */
const COMMAND_NAME = 'gpugate';

/** How long `node --version` of the service's Node may take. */
const NODE_VERSION_TIMEOUT_MS = 10_000;

/** The program of the gate line, and why it has that form. */
export interface ResolvedGateProgram extends GateProgram {
  /** `installed-command`: the gpugate command on the system path; `node-script`: node and main.js by absolute path. */
  form: 'installed-command' | 'node-script';
  /** The installed command (its path on the system path) or main.js that the line names. */
  command: string;
  /** The real path of the main.js that is running now. */
  runningFrom: string;
  /** Why the line is not the installed command form; null when it is. */
  why: string | null;
  /** Each path the line names that a service should not depend on, with the reason: one sentence each. */
  unstable: string[];
}

/** The gate line's program for a service of this host (its PATH: `env`'s GPUGATE_SERVICE_PATH, else systemd's default). */
export function resolveGateProgram(env: NodeJS.ProcessEnv = process.env): ResolvedGateProgram {
  const runningFrom = realPathOf(join(PACKAGE_ROOT, 'dist', 'cli', 'main.js'));
  const dirs = servicePathDirs(env);
  const refused: string[] = [];
  const installed = installedCommand(dirs, refused, env);
  if (installed === null) {
    const why = `no ${COMMAND_NAME} command a service can rely on in ${dirs.join(':')}${refused.length > 0 ? ` (${refused.join('; ')})` : ''}: install one with npm install -g gpugate`;
    return nodeScript(runningFrom, runningFrom, why, env);
  }
  const nodeProblem = serviceNodeProblem(dirs);
  if (nodeProblem !== null) return nodeScript(installed.real, runningFrom, `${nodeProblem}, so the shebang of ${installed.path} would fail in the service`, env);
  return { argv: [installed.path], form: 'installed-command', command: installed.path, runningFrom, why: null, unstable: [] };
}

/** node (this one) and `script` by absolute path; the paths a service should not depend on listed. */
function nodeScript(script: string, runningFrom: string, why: string, env: NodeJS.ProcessEnv): ResolvedGateProgram {
  const node = realPathOf(process.execPath);
  const unstable = [[node, 'node'], [script, `${COMMAND_NAME}'s main.js`]].flatMap(([path, what]) => {
    const reason = unstableLocation(path as string, env);
    return reason === null ? [] : [`${what} ${path as string} is in ${reason}`];
  });
  return { argv: nodeScriptArgv(node, script), form: 'node-script', command: script, runningFrom, why, unstable };
}

/**
 * The first `gpugate` in `dirs` that is this package's command, owned by root, writable by no one
 * else and in a place that stays; the reasons for skipping others go to `refused`.
 */
function installedCommand(dirs: readonly string[], refused: string[], env: NodeJS.ProcessEnv): { path: string; real: string } | null {
  for (const dir of dirs) {
    const path = join(dir, COMMAND_NAME);
    if (!existsSync(path)) continue;
    const real = realPathOf(path);
    const problem = commandProblem(real, env);
    if (problem === null) return { path, real };
    refused.push(`${path}: ${problem}`);
  }
  return null;
}

/** Why `real` is not a gpugate command a root service may run, or null. */
function commandProblem(real: string, env: NodeJS.ProcessEnv): string | null {
  if (!real.endsWith(`${sep}dist${sep}cli${sep}main.js`) || packageName(dirname(dirname(dirname(real)))) !== 'gpugate') {
    return `${real} is not gpugate's dist/cli/main.js`;
  }
  const where = unstableLocation(real, env);
  if (where !== null) return `${real} is in ${where}`;
  return notRootOnly(real);
}

/** The first of `real` (a resolved path) and the folders above it that a user other than root may change, as a sentence; null when none. */
function notRootOnly(real: string): string | null {
  for (let path = real; ; path = dirname(path)) {
    const stat = lstatSync(path);
    // Whoever may change the file or a folder above it could put their code in a root service.
    if (stat.uid !== 0 || (stat.mode & 0o002) !== 0 || ((stat.mode & 0o020) !== 0 && stat.gid !== 0)) {
      return `${path} may be changed by a user other than root`;
    }
    if (path === dirname(path)) return null;
  }
}

/** The `name` of the package.json in `dir`, or null. */
function packageName(dir: string): string | null {
  try {
    const parsed = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: unknown };
    return typeof parsed.name === 'string' ? parsed.name : null;
  } catch {
    return null;
  }
}

/** Why the `node` that a service's `env -S node` finds first in `dirs` cannot run the command, or null when it can. */
function serviceNodeProblem(dirs: readonly string[]): string | null {
  const node = dirs.map((dir) => join(dir, 'node')).find((path) => {
    try {
      accessSync(path, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
  if (node === undefined) return `there is no node in ${dirs.join(':')}`;
  // Never run, as root, a program another user could have put there.
  const changeable = notRootOnly(realPathOf(node));
  if (changeable !== null) return `the service's node ${node} is not root's alone (${changeable})`;
  const run = spawnSync(node, ['--version'], { encoding: 'utf8', timeout: NODE_VERSION_TIMEOUT_MS, stdio: ['ignore', 'pipe', 'ignore'] });
  const version = /^v(\d+\.\d+\.\d+)/.exec(run.stdout ?? '')?.[1];
  if (run.status !== 0 || version === undefined) return `${node} --version did not answer`;
  const problem = unsupportedNode(version, node);
  return problem === null ? null : `${node} is Node.js ${version}, older than the command needs`;
}

/** `path` with every link resolved; the path itself when that fails. */
function realPathOf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

