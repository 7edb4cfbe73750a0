/**
 * selectGpus as a library call, through the real addon and the simulator: it leases to the
 * calling process by default (no holder with a duration alone; lease: false still honours others'
 * leases), in the lease directory the option names (over GPUGATE_LEASE_DIR),
 * rejects bad options with TypeErrors naming them, and resolves 'busy' with the candidates when
 * too few GPUs are free. The placement choice and the sysfs address rules, as pure functions.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config-error';
import { chooseNearest, nearness } from '../../src/gate/placement';
import { selectGpus } from '../../src/gate/select';
import type { PciPlacement } from '../../src/host/pci-topology';
import { sysfsPciAddress } from '../../src/host/pci-topology';
import { isAlive, killSpawned, spawnSleeper, until } from '../helpers/processes';
import { simDevice } from '../helpers/sim';
import { freshSimulator, GiB, tempDir, useScenario } from '../helpers/session-helpers';

const at = (hostBridge: string, upstream: string[], numaNode: number | null): PciPlacement => ({ address: 'x', numaNode, hostBridge, upstream });

describe('chooseNearest', () => {
  const unknown = [0, 1, 2, 3].map((index) => ({ index, placement: null }));

  it('takes plain NVML order when nothing is known of the topology, and everything when there are no more than N', () => {
    expect(chooseNearest(unknown, 2).map((c) => c.index)).toEqual([0, 1]);
    expect(chooseNearest(unknown, 4).map((c) => c.index)).toEqual([0, 1, 2, 3]);
    expect(chooseNearest(unknown, 0)).toEqual([]);
  });

  it('prefers one switch over one host bridge over one NUMA node over anything', () => {
    const a = at('pci0000:00', ['0000:00:01.0', '0000:01:00.0'], 0);
    const b = at('pci0000:00', ['0000:00:01.0', '0000:01:00.0'], 0);
    const c = at('pci0000:00', ['0000:00:02.0'], 0);
    const d = at('pci0000:40', ['0000:40:01.0'], 0);
    const e = at('pci0000:80', ['0000:80:01.0'], 1);
    expect([nearness(a, b), nearness(a, c), nearness(a, d), nearness(a, e), nearness(a, null)]).toEqual(['switch', 'host-bridge', 'numa-node', 'far', 'far']);
    const candidates = [{ index: 0, placement: e }, { index: 1, placement: c }, { index: 2, placement: a }, { index: 3, placement: b }];
    expect(chooseNearest(candidates, 2).map((x) => x.index)).toEqual([2, 3]);
  });
});

describe('sysfsPciAddress', () => {
  it("writes NVML's bus id as sysfs names the device, and refuses what is not one", () => {
    expect(sysfsPciAddress('00000000:1B:00.0')).toBe('0000:1b:00.0');
    expect(sysfsPciAddress('00010000:02:1F.7')).toBe('10000:02:1f.7');
    expect(sysfsPciAddress('GPU-1234')).toBeNull();
  });
});

describe('selectGpus on the simulator', () => {
  afterEach(async () => killSpawned());

  it('leases to the calling process by default, in the directory the option names', async () => {
    const libraryPath = freshSimulator();
    useScenario({ devices: [simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 40 * GiB } }), simDevice(1), simDevice(2)] });
    const leaseDir = path.join(tempDir(), `select-leases-${process.pid}`);
    const result = await selectGpus({ libraryPath, count: 2, leaseDir, sysfsRoot: path.join(tempDir(), 'no-sysfs'), env: { GPUGATE_LEASE_DIR: path.join(tempDir(), 'not-this-one') } });
    expect(result.result).toBe('selected');
    expect(result.gpus.map((gpu) => gpu.index)).toEqual([1, 2]);
    const record = JSON.parse(readFileSync(path.join(leaseDir, `${result.gpus[0]!.uuid}.lease`), 'utf8')) as { holderPid: number; selectorPid: number };
    expect(record).toMatchObject({ holderPid: process.pid, selectorPid: process.pid });
    expect(existsSync(path.join(tempDir(), 'not-this-one'))).toBe(false);
    expect(result.candidates.find((c) => c.index === 0)).toMatchObject({ eligible: false, exclusions: ['memory'], lease: null });

    const again = await selectGpus({ libraryPath, count: 1, leaseDir, sysfsRoot: path.join(tempDir(), 'no-sysfs') });
    expect(again.result).toBe('busy');
    expect(again.gpus).toEqual([]);
    expect(again.reason).toMatch(/0 of 3 GPUs eligible, 1 needed/);
    expect(again.candidates.filter((c) => c.exclusions.includes('leased')).map((c) => c.index)).toEqual([1, 2]);
  });

  it('with wait, keeps polling while every GPU is free but leased, and takes one once its holder exits', async () => {
    const libraryPath = freshSimulator();
    useScenario({ devices: [simDevice(0), simDevice(1)] });
    const leaseDir = path.join(tempDir(), `select-wait-leases-${process.pid}`);
    const sysfsRoot = path.join(tempDir(), 'no-sysfs');
    const holder = await spawnSleeper();
    const first = await selectGpus({ libraryPath, count: 2, leaseDir, sysfsRoot, leaseHolderPid: holder });
    expect(first.result).toBe('selected');
    let polls = 0;
    const waiting = selectGpus({ libraryPath, count: 1, leaseDir, sysfsRoot, wait: true, stableMs: 0, intervalMs: 50, timeoutMs: 30_000, onPoll: () => (polls += 1) });
    // Both GPUs are free, so a plain wait would have ended at its first poll; this one must go on.
    await until('several polls while leased', () => polls >= 5);
    process.kill(holder, 'SIGKILL');
    await until(`holder ${holder} to die`, () => !isAlive(holder));
    const result = await waiting;
    expect(result.result).toBe('selected');
    expect(result.gpus.map((gpu) => gpu.index)).toEqual([0]);
    expect(result.candidates[0]!.lease).toMatchObject({ state: 'stale', holderPid: holder });
    // One pipeline throughout: every poll it evaluated is counted, none lost to a restarted wait.
    expect(result.polls).toBe(polls);
  });

  it('with leaseDurationMs alone binds no holder; with lease: false passes over GPUs leased to others and writes nothing', async () => {
    const libraryPath = freshSimulator();
    useScenario({ devices: [simDevice(0), simDevice(1)] });
    const leaseDir = path.join(tempDir(), `select-duration-leases-${process.pid}`);
    const sysfsRoot = path.join(tempDir(), 'no-sysfs');
    const timed = await selectGpus({ libraryPath, count: 1, leaseDir, sysfsRoot, leaseDurationMs: 60_000 });
    expect(timed.result).toBe('selected');
    const file = path.join(leaseDir, `${timed.gpus[0]!.uuid}.lease`);
    const record = JSON.parse(readFileSync(file, 'utf8')) as { holderPid: number | null; sinceBootMs: number; expiresSinceBootMs: number };
    expect(record.holderPid).toBeNull();
    expect(record.expiresSinceBootMs - record.sinceBootMs).toBe(60_000);
    const look = await selectGpus({ libraryPath, count: 1, leaseDir, sysfsRoot, lease: false });
    expect(look.gpus.map((gpu) => gpu.index)).toEqual([1]);
    expect(look.candidates[0]).toMatchObject({ eligible: false, exclusions: ['leased'], lease: { state: 'held' } });
    const both = await selectGpus({ libraryPath, count: 2, leaseDir, sysfsRoot, lease: false });
    expect(both.result).toBe('busy');
    expect(readdirSync(leaseDir).filter((name) => name.endsWith('.lease'))).toEqual([`${timed.gpus[0]!.uuid}.lease`]);
  });

  it('rejects bad options with ConfigErrors that name them', async () => {
    await expect(selectGpus({ count: 0 })).rejects.toThrow(/option count must be an integer >= 1, got 0/);
    await expect(selectGpus({ count: 1.5 })).rejects.toSatisfy((error) => error instanceof ConfigError && error.code === 'GPUGATE_CONFIG' && error.option === 'count');
    await expect(selectGpus({ count: 1, leaseHolderPid: -3 })).rejects.toThrow(/option leaseHolderPid/);
    await expect(selectGpus({ count: 1, leaseHolderPid: null })).rejects.toThrow(/a lease needs a holder .* or a duration/);
    await expect(selectGpus({ count: 1, leaseDurationMs: Number.NaN })).rejects.toThrow(/option leaseDurationMs/);
    await expect(selectGpus({ count: 1, wait: 'yes' as unknown as boolean })).rejects.toThrow(/option wait must be a boolean/);
  });
});
