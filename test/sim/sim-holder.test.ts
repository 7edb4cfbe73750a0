/**
 * The simulated host's stand-in holders (src/simulator/sim-holder.ts) are real reparented
 * processes that the demo ends by SIGKILL: that signal goes through a pidfd opened before the
 * holder's identity is proven, so it reaches the holder or no process, and a pid that no longer
 * names the holder is never signalled.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SimHolder } from '../../src/simulator/sim-holder';
import { testTempDir } from '../helpers/sim';

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

describe('SimHolder.stop', () => {
  it('ends the holder through a pidfd, never by its pid', async () => {
    const holder = SimHolder.start('VLLM::Worker_TP3', binDir());
    expect(holder.alive()).toBe(true);
    const byPid = vi.spyOn(process, 'kill');
    holder.stop();
    expect(byPid).not.toHaveBeenCalled();
    expect(holder.alive()).toBe(false);
    expect(await gone(holder.pid)).toBe(true);
  });

  it('signals nothing once the pid names another process', async () => {
    const holder = SimHolder.start('VLLM::Worker_TP4', binDir());
    holder.stop();
    expect(await gone(holder.pid)).toBe(true);
    // Another process now answers to a pid the holder had; here a live child stands at the same
    // kind of place: a holder object whose proof fails must leave it alone.
    const other = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      // The holder's fields, with the live child's pid and a start time it does not have.
      const impostor = Object.create(SimHolder.prototype) as SimHolder;
      Object.assign(impostor, { pid: other.pid!, title: holder.title, startTime: '1' });
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
