/**
 * The simulated host's stand-in holders (src/simulator/sim-holder.ts) are real reparented
 * processes that are never signalled: each reads a socket whose other end only the process that
 * started it holds, and ends at end of file, when stop() closes that end or that process exits.
 * No pid is acted on, so a process that took a holder's pid is never touched.
 */
import { spawn } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SimHolder } from '../../src/simulator/sim-holder';
import { isAlive, procPpid, until } from '../helpers/processes';
import { repoRoot, testTempDir } from '../helpers/sim';

const dirs: string[] = [];
afterEach(() => {
  vi.restoreAllMocks();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function binDir(): string {
  const dir = mkdtempSync(path.join(testTempDir(), 'sim-holder-'));
  dirs.push(dir);
  return dir;
}

/**
 * Resolves once the holder has ended: no /proc entry, or a zombie. A holder is reparented, so its
 * zombie is reaped by PID 1 (or a subreaper) on that process's own schedule, which is no measure
 * of the holder.
 */
async function ended(pid: number): Promise<void> {
  await until(`holder ${pid} to end`, () => !isAlive(pid));
  expect(isAlive(pid)).toBe(false);
}

describe('SimHolder', () => {
  it('runs under its title as comm and argv[0], reparented away from its starter, leaving only its symlink', () => {
    const dir = binDir();
    const holder = SimHolder.start('VLLM::Worker_TP2', dir);
    try {
      expect(holder.alive()).toBe(true);
      expect(readFileSync(`/proc/${holder.pid}/comm`, 'utf8')).toBe('VLLM::Worker_TP\n');
      expect(readFileSync(`/proc/${holder.pid}/cmdline`, 'utf8')).toBe('VLLM::Worker_TP2\0');
      // Reparented by the time start() returns: neither this process nor the bash that started it.
      const parent = procPpid(holder.pid)!;
      expect(parent).not.toBe(process.pid);
      expect(readFileSync(`/proc/${parent}/comm`, 'utf8')).not.toBe('bash\n');
      // Its pid came from the kernel (bash's children), not through a file.
      expect(readdirSync(dir)).toEqual(['VLLM::Worker_TP2']);
      expect(lstatSync(path.join(dir, 'VLLM::Worker_TP2')).isSymbolicLink()).toBe(true);
    } finally {
      holder.stop();
    }
  });

  it('stop() ends the holder without sending any signal', async () => {
    const holder = SimHolder.start('VLLM::Worker_TP3', binDir());
    expect(holder.alive()).toBe(true);
    const byPid = vi.spyOn(process, 'kill');
    holder.stop();
    expect(byPid).not.toHaveBeenCalled();
    expect(holder.alive()).toBe(false);
    await ended(holder.pid);
  });

  it('lives while the process that started it does, and ends by itself when that process exits', async () => {
    // A separate Node process starts a holder, prints its pid, and exits when its stdin closes,
    // without stopping the holder.
    const script = `const { SimHolder } = require(${JSON.stringify(path.join(repoRoot(), 'dist', 'simulator', 'sim-holder.js'))});
      process.stdout.write(SimHolder.start('VLLM::Worker_TP5', process.argv[1]).pid + '\\n');
      process.stdin.on('end', () => process.exit(0)).resume();`;
    const starter = spawn(process.execPath, ['-e', script, binDir()], { stdio: ['pipe', 'pipe', 'inherit'] });
    const exited = new Promise<number | null>((resolve) => starter.on('exit', (code) => resolve(code)));
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let text = '';
        starter.stdout!.on('data', (chunk: Buffer) => {
          text += chunk.toString();
          if (text.includes('\n')) resolve(text.trim());
        });
        starter.on('exit', (code) => reject(new Error(`the starter exited (${code}) before printing a pid: ${JSON.stringify(text)}`)));
      });
      const pid = Number(line);
      expect(Number.isInteger(pid) && pid > 1).toBe(true);
      expect(isAlive(pid)).toBe(true);
      expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).toBe('VLLM::Worker_TP5\0');
      starter.stdin!.end();
      expect(await exited).toBe(0);
      await ended(pid);
    } finally {
      starter.kill('SIGKILL');
    }
  });

  it('stop() leaves alone a live process that has a pid the holder had', async () => {
    const holder = SimHolder.start('VLLM::Worker_TP4', binDir());
    holder.stop();
    await ended(holder.pid);
    // Another process now answers to a pid the holder had; here a live child stands at the same
    // kind of place: stopping a holder object that names it must leave it alone.
    const other = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      const impostor = Object.create(SimHolder.prototype) as SimHolder;
      Object.assign(impostor, { pid: other.pid!, title: holder.title, startTime: 1, lifeline: { destroy: () => undefined } });
      expect(impostor.alive()).toBe(false);
      impostor.stop();
      expect(existsSync(`/proc/${other.pid!}`)).toBe(true);
      expect(other.exitCode).toBeNull();
      expect(other.signalCode).toBeNull();
    } finally {
      other.kill('SIGKILL');
    }
  });
});
