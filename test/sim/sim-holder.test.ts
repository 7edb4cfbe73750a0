/**
 * The simulated host's stand-in holders (src/simulator/sim-holder.ts) are real reparented
 * processes that are never signalled: each reads a socket whose other end only the process that
 * started it holds, and ends at end of file, when stop() closes that end or that process exits.
 * No pid is acted on, so a process that took a holder's pid is never touched.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SimHolder } from '../../src/simulator/sim-holder';
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

/** Polls until the pid's /proc entry is gone (the holder is reparented, so init reaps it). */
async function gone(pid: number): Promise<boolean> {
  for (let i = 0; i < 400; i += 1) {
    if (!existsSync(`/proc/${pid}`)) return true;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return false;
}

/** Field 4 of /proc/PID/stat: the parent's pid. */
function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

describe('SimHolder', () => {
  it('runs under its title as comm and argv[0], reparented away from its starter', () => {
    const holder = SimHolder.start('VLLM::Worker_TP2', binDir());
    try {
      expect(holder.alive()).toBe(true);
      expect(readFileSync(`/proc/${holder.pid}/comm`, 'utf8')).toBe('VLLM::Worker_TP\n');
      expect(readFileSync(`/proc/${holder.pid}/cmdline`, 'utf8')).toBe('VLLM::Worker_TP2\0');
      expect(parentOf(holder.pid)).not.toBe(process.pid);
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
    expect(await gone(holder.pid)).toBe(true);
  });

  it('ends by itself when the process that started it exits', async () => {
    // A separate Node process starts a holder, prints its pid and exits without stopping it.
    const script = `const { SimHolder } = require(${JSON.stringify(path.join(repoRoot(), 'dist', 'simulator', 'sim-holder.js'))});
      process.stdout.write(String(SimHolder.start('VLLM::Worker_TP5', process.argv[1]).pid));`;
    const pid = Number(execFileSync(process.execPath, ['-e', script, binDir()], { encoding: 'utf8', timeout: 20_000 }));
    expect(Number.isInteger(pid) && pid > 1).toBe(true);
    expect(await gone(pid)).toBe(true);
  });

  it('stop() leaves alone a live process that has a pid the holder had', async () => {
    const holder = SimHolder.start('VLLM::Worker_TP4', binDir());
    holder.stop();
    expect(await gone(holder.pid)).toBe(true);
    // Another process now answers to a pid the holder had; here a live child stands at the same
    // kind of place: stopping a holder object that names it must leave it alone.
    const other = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      const impostor = Object.create(SimHolder.prototype) as SimHolder;
      Object.assign(impostor, { pid: other.pid!, title: holder.title, startTime: '1', lifeline: { destroy: () => undefined } });
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
