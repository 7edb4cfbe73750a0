/**
 * The independent C NVML client (test/c/nvml_client.c), compiled once per test file into a temp
 * dir, and a way to run it: it dlopens the simulator by path (--lib) or as libnvidia-ml.so.1.
 */
import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { repoRoot } from './sim';
import { makeTestTempDir } from './temp-root';

export interface ClientResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Compiles the client; returns its path and a cleanup that removes it. */
export async function buildNvmlClient(): Promise<{ client: string; remove: () => void }> {
  const dir = makeTestTempDir('gpugate-nvml-client-');
  const client = path.join(dir, 'nvml_client');
  await new Promise<void>((resolve, reject) => {
    execFile('cc', ['-O2', '-Wall', '-o', client, path.join(repoRoot(), 'test', 'c', 'nvml_client.c'), '-ldl', '-lpthread'], (error, _out, stderr) => {
      if (error) reject(new Error(`cc failed: ${stderr}`));
      else resolve();
    });
  });
  return { client, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/** Runs the client to completion. */
export function runNvmlClient(client: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs = 20_000): Promise<ClientResult> {
  return new Promise((resolve) => {
    execFile(client, args, { env, timeout: timeoutMs }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
      resolve({ code, stdout, stderr });
    });
  });
}

/** Starts the client's `interactive` mode; ask() sends one command and resolves with its answer line. */
export function interactiveNvmlClient(client: string, lib: string, env: NodeJS.ProcessEnv): {
  child: ChildProcessWithoutNullStreams;
  ready: Promise<void>;
  ask: (command: string) => Promise<string>;
} {
  const child = spawn(client, ['--lib', lib, 'interactive'], { env });
  const lines: string[] = [];
  const waiters: Array<(line: string) => void> = [];
  let buffered = '';
  child.stdout.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    let at: number;
    while ((at = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, at);
      buffered = buffered.slice(at + 1);
      const waiter = waiters.shift();
      if (waiter) waiter(line);
      else lines.push(line);
    }
  });
  const nextLine = (): Promise<string> =>
    new Promise((resolve) => {
      const line = lines.shift();
      if (line !== undefined) resolve(line);
      else waiters.push(resolve);
    });
  const ready = nextLine().then((line) => {
    if (line !== 'ready') throw new Error(`the NVML client did not start: ${line}`);
  });
  return {
    child,
    ready,
    ask: (command: string) => {
      child.stdin.write(`${command}\n`);
      return nextLine();
    },
  };
}
