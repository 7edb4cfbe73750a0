/**
 * Runs a Node.js script in a child process, so that a crash of the native layer (an abort, a
 * signal) is observed as the child's exit code or signal instead of taking the test runner down.
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { repoRoot } from './sim';

export interface NodeScriptRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** The built CommonJS entry of the package, as a quoted string for embedding in a script. */
export function packageEntryLiteral(): string {
  return JSON.stringify(path.join(repoRoot(), 'dist', 'index.js'));
}

/** `node -e script` from the repository root; killed (SIGKILL) after `killAfterMs`. */
export function runNodeScript(script: string, env: NodeJS.ProcessEnv, killAfterMs = 60_000): Promise<NodeScriptRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script], { cwd: repoRoot(), env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const killer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    child.once('error', (error) => {
      clearTimeout(killer);
      reject(error);
    });
    child.once('close', (code, signal) => {
      clearTimeout(killer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}
