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

/** A Node.js script still running: its pid, its output so far, and its exit as an event. */
export interface NodeScriptProcess {
  pid: number;
  stdout(): string;
  stderr(): string;
  /** Resolves once `pattern` appears on stdout; rejects if the script exits first. */
  printed(pattern: RegExp): Promise<void>;
  /** Resolves with how the script ended (its output may still be arriving: use `closed` for all of it). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  closed: Promise<NodeScriptRun>;
  kill(): void;
}

/** `node -e script` from the repository root, left running; killed (SIGKILL) after `killAfterMs`. */
export function startNodeScript(script: string, env: NodeJS.ProcessEnv, killAfterMs = 60_000): NodeScriptProcess {
  const child = spawn(process.execPath, ['-e', script], { cwd: repoRoot(), env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  const watchers = new Set<() => void>();
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    for (const watch of watchers) watch();
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const killer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      clearTimeout(killer);
      resolve({ code, signal });
    });
  });
  const closed = new Promise<NodeScriptRun>((resolve) => {
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return {
    pid: child.pid!,
    stdout: () => stdout,
    stderr: () => stderr,
    printed: (pattern) =>
      new Promise<void>((resolve, reject) => {
        const watch = (): void => {
          if (!pattern.test(stdout)) return;
          watchers.delete(watch);
          resolve();
        };
        watchers.add(watch);
        watch();
        void closed.then(() => {
          watchers.delete(watch);
          if (pattern.test(stdout)) resolve();
          else reject(new Error(`the script ended without printing ${String(pattern)}; stdout:\n${stdout}\nstderr:\n${stderr}`));
        });
      }),
    exited,
    closed,
    kill: () => child.kill('SIGKILL'),
  };
}
