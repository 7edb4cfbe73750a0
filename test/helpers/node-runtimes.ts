/**
 * Node.js runtimes other than the one running the tests, for running the real command under each
 * supported Node: installed from the npm registry into a shared cache (scripts/node-runtime.cjs,
 * which `.ci/run` calls first, so CI always has them). A test skips, saying why, only when the
 * runtime cannot be installed here.
 */
import { join } from 'node:path';
import { nodeRuntime } from '../../scripts/node-runtime.cjs';

/** A runtime: its `node` and the folder holding it (what goes first on PATH for the shebang). */
export interface NodeRuntime {
  node: string;
  binDir: string;
}

/** Node `major`, or why it is not available here. */
export function nodeRuntimeOrReason(major: number): { runtime: NodeRuntime; reason: null } | { runtime: null; reason: string } {
  try {
    const dir = nodeRuntime(major);
    return { runtime: { node: join(dir, 'bin', 'node'), binDir: join(dir, 'bin') }, reason: null };
  } catch (error) {
    return { runtime: null, reason: `Node ${major} is not installed and could not be installed: ${error instanceof Error ? error.message : String(error)}` };
  }
}

/** `env` with `runtime`'s folder first on PATH, so `#!/usr/bin/env -S node …` starts that Node. */
export function withRuntimeOnPath(env: NodeJS.ProcessEnv, runtime: NodeRuntime): NodeJS.ProcessEnv {
  return { ...env, PATH: `${runtime.binDir}:${env['PATH'] ?? '/usr/bin:/bin'}` };
}
