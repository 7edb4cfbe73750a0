/**
 * The per-GPU criteria policy (src/gate/criteria.ts): vLLM's own start check for minFree, the maxUsed
 * default, ignore lists, impossible configurations, and the stability window; with property tests.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DEFAULT_MAX_USED_BYTES, StabilityTracker, implausibleMemory, maxUsedBytes, neededFreeBytes, nothingLeftToFree, reservedInUsed, resolveCriteria, usedExcludingReserved } from '../../src/gate/criteria';
import type { GpuMemory } from '../../src/types';
import { ConfigError } from '../../src/config-error';
import { thrownBy } from '../helpers/thrown-by';

const SEED = { seed: 1129, numRuns: 500 };
const GiB = 1024 ** 3;

describe('resolveCriteria', () => {
  it('maxUsed defaults to 1 GiB only when no criterion is given', () => {
    expect(resolveCriteria({}).maxUsed).toEqual({ bytes: DEFAULT_MAX_USED_BYTES });
    expect(resolveCriteria({ minFree: { fraction: 0.9 } }).maxUsed).toBeNull();
    expect(resolveCriteria({ noProcesses: true }).maxUsed).toBeNull();
    expect(resolveCriteria({ maxUsed: { bytes: 5 } }).maxUsed).toEqual({ bytes: 5 });
  });

  it('always ignores the caller; ignores the NVIDIA daemons (once proven) unless told not to; pids and names from ignore', () => {
    const criteria = resolveCriteria({ ignore: [4242, '77', 'my-daemon'] }, 1000);
    expect([...criteria.ignorePids].sort()).toEqual([1000, 4242, 77].sort());
    expect([...criteria.ignoreNames]).toEqual(['my-daemon']);
    expect([...criteria.ignoreDaemons].sort()).toEqual(['dcgm-exporter', 'nv-hostengine', 'nvidia-persistenced']);
    const bare = resolveCriteria({ ignoreDefaults: false }, 1000);
    expect([...bare.ignoreNames]).toEqual([]);
    expect([...bare.ignoreDaemons]).toEqual([]);
    expect([...bare.ignorePids]).toEqual([1000]);
  });

  it('rejects impossible values with ConfigError naming the option', () => {
    for (const options of [{ minFree: { fraction: 0 } }, { minFree: { fraction: 1.01 } }, { maxUsed: { fraction: 2 } }, { marginBytes: -1 }, { stableMs: -5 }, { minFree: { bytes: 1.5 } }]) {
      expect(() => resolveCriteria(options)).toThrow(ConfigError);
    }
    try {
      resolveCriteria({ minFree: { fraction: 1.5 } });
    } catch (error) {
      expect((error as ConfigError).option).toBe('minFree');
      expect((error as Error).message).toMatch(/1\.5/);
    }
  });
});

describe('thresholds', () => {
  it('minFree is exactly vLLM\'s check, ceil(total * f) + margin, and never above total (property)', () => {
    fc.assert(
      // Up to 0.999: a fraction of 1 is refused when the criteria are resolved (the test after this).
      fc.property(fc.integer({ min: 1, max: 2 ** 42 }), fc.integer({ min: 1, max: 999 }), fc.nat(4 * GiB), (total, permille, margin) => {
        const fraction = permille / 1000;
        const criteria = resolveCriteria({ minFree: { fraction }, marginBytes: margin });
        const expected = Math.ceil(total * fraction) + margin;
        if (expected > total) {
          expect(() => neededFreeBytes(criteria, total)).toThrow(ConfigError);
        } else {
          const needed = neededFreeBytes(criteria, total)!;
          expect(needed).toBe(expected);
          // vLLM starts iff free >= ceil(total * f): free = needed passes, one byte less fails.
          expect(needed - margin).toBeGreaterThanOrEqual(total * fraction);
          expect(needed - margin - 1).toBeLessThan(total * fraction);
        }
      }),
      SEED,
    );
  });

  it('minFree of the whole GPU (fraction 1) is refused: the driver reserves memory, so it could never be met', () => {
    const error = thrownBy(() => resolveCriteria({ minFree: { fraction: 1 } }), ConfigError);
    expect(error.option).toBe('minFree');
    expect(error.message).toMatch(/minFree fraction 1 is out of range: expected above 0 and below 1/);
    expect(resolveCriteria({ minFree: { fraction: 0.999 } }).minFree).toEqual({ fraction: 0.999 });
    expect(resolveCriteria({ maxUsed: { fraction: 1 } }).maxUsed).toEqual({ fraction: 1 });
  });

  it('maxUsed as a fraction floors, as bytes is taken as is (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 ** 42 }), fc.integer({ min: 0, max: 1000 }), (total, permille) => {
        const fraction = permille / 1000;
        const allowed = maxUsedBytes(resolveCriteria({ maxUsed: { fraction } }), total)!;
        expect(allowed).toBeLessThanOrEqual(total * fraction);
        expect(allowed + 1).toBeGreaterThan(total * fraction);
      }),
      SEED,
    );
    expect(maxUsedBytes(resolveCriteria({ maxUsed: { bytes: 7 } }), 100)).toBe(7);
    expect(maxUsedBytes(resolveCriteria({ minFree: { bytes: 7 } }), 100)).toBeNull();
  });

  it('a byte minFree above the total is a ConfigError naming both sizes', () => {
    expect(() => neededFreeBytes(resolveCriteria({ minFree: { bytes: 100 * GiB } }), 96 * GiB, 'GPU 3')).toThrow(/GPU 3: minFree needs 100GiB .* only 96GiB/);
  });
});

describe('StabilityTracker', () => {
  it('counts time since the window start; restarts when the spread exceeds the tolerance', () => {
    const tracker = new StabilityTracker(100);
    expect(tracker.update('0', 1000, 0)).toBe(0);
    expect(tracker.update('0', 1050, 10)).toBe(10);
    expect(tracker.update('0', 950, 20)).toBe(20);
    expect(tracker.update('0', 1060, 30)).toBe(0); // spread 950..1060 > 100
    expect(tracker.update('0', 1060, 45)).toBe(15);
    expect(tracker.update('1', 5, 45)).toBe(0);
    tracker.reset('0');
    expect(tracker.update('0', 1060, 50)).toBe(0);
  });

  it('stable time equals the time since the last sample that broke the tolerance (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 1000 }), { minLength: 1, maxLength: 60 }), fc.integer({ min: 0, max: 300 }), (values, tolerance) => {
        const tracker = new StabilityTracker(tolerance);
        let windowStart = 0;
        let lo = values[0]!;
        let hi = values[0]!;
        values.forEach((value, i) => {
          const stable = tracker.update('g', value, i * 10);
          if (i > 0) {
            const nlo = Math.min(lo, value);
            const nhi = Math.max(hi, value);
            if (nhi - nlo > tolerance) {
              windowStart = i;
              lo = value;
              hi = value;
            } else {
              lo = nlo;
              hi = nhi;
            }
          }
          expect(stable).toBe((i - windowStart) * 10);
          expect(hi - lo).toBeLessThanOrEqual(tolerance);
        });
      }),
      SEED,
    );
  });
});

describe('nothingLeftToFree (when a stability window has nothing left to wait for)', () => {
  const tolerance = 256 * 1024 ** 2;

  it('is true for an idle GPU with no holder, and for live holders that account for the used memory', () => {
    expect(nothingLeftToFree(0, [], [], tolerance)).toBe(true);
    expect(nothingLeftToFree(tolerance, [], [], tolerance)).toBe(true);
    expect(nothingLeftToFree(1 * GiB, [{ class: 'foreign', usedBytes: 1 * GiB }], [], tolerance)).toBe(true);
    expect(nothingLeftToFree(2 * GiB, [{ class: 'active', usedBytes: 1 * GiB }], [1 * GiB], tolerance)).toBe(true);
  });

  it('is false while memory can still come back', () => {
    // Memory off the process list (a process gone, its memory still draining).
    expect(nothingLeftToFree(tolerance + 1, [], [], tolerance)).toBe(false);
    for (const dying of ['gone', 'draining', 'zombie', 'zombie_live_threads', 'orphan', 'leftover', 'unverifiable'] as const) {
      expect(nothingLeftToFree(1 * GiB, [{ class: dying, usedBytes: 1 * GiB }], [], tolerance)).toBe(false);
    }
    // Unknown figures never count as settled.
    expect(nothingLeftToFree(1 * GiB, [{ class: 'foreign', usedBytes: null }], [], tolerance)).toBe(false);
    expect(nothingLeftToFree(1 * GiB, [], [null], tolerance)).toBe(false);
  });
});

describe('v2 memory readings: used with or without reserved (driver semantics differ)', () => {
  const MiB = 1024 ** 2;
  /** A v2 reading of a card with `reserved` MiB reserved and `used` MiB in use by processes; R525 semantics counts reserved in used. */
  const reading = (totalMiB: number, reservedMiB: number, usedMiB: number, r525: boolean, roundingMiB = 3): GpuMemory => ({
    totalBytes: totalMiB * MiB,
    reservedBytes: reservedMiB * MiB,
    usedBytes: (usedMiB + (r525 ? reservedMiB : 0)) * MiB,
    freeBytes: (totalMiB - reservedMiB - usedMiB - roundingMiB) * MiB,
    source: 'v2',
  });

  it('accepts an L40S and a 24 GiB card read with the R525 semantics, and says which semantics each reading has', () => {
    // 569 MiB reserved on 46 GiB (over 1 %), ~346 MiB on 24 GiB: the excluded-reserved sum alone is off by reserved.
    for (const [total, reserved] of [[46068, 569], [24576, 346]] as const) {
      const r525 = reading(total, reserved, 0, true);
      expect(implausibleMemory(r525)).toBeNull();
      expect(reservedInUsed(r525)).toBe(true);
      expect(usedExcludingReserved(r525)).toBe(0);
      const current = reading(total, reserved, 0, false);
      expect(implausibleMemory(current)).toBeNull();
      expect(reservedInUsed(current)).toBe(false);
      expect(usedExcludingReserved(current)).toBe(0);
    }
  });

  it('tells the semantics apart on a 96 GiB card, where reserved (640 MiB) is within the tolerance', () => {
    const r525 = reading(97887, 640, 2048, true);
    expect(reservedInUsed(r525)).toBe(true);
    expect(usedExcludingReserved(r525)).toBe(2048 * MiB);
    expect(reservedInUsed(reading(97887, 640, 2048, false))).toBe(false);
    // Nothing reserved: both ways of counting give the same sum, and the reading cannot tell.
    expect(reservedInUsed(reading(97887, 0, 2048, false))).toBeNull();
    // v1 always counts reserved in used.
    expect(reservedInUsed({ totalBytes: 97887 * MiB, freeBytes: 97000 * MiB, usedBytes: 887 * MiB, reservedBytes: null, source: 'v1' })).toBe(true);
  });

  it('still rejects a reading that fits neither way, naming both sums', () => {
    // L40S: free is 2 GiB short of either sum.
    const broken = reading(46068, 569, 0, false, 2048);
    const why = implausibleMemory(broken);
    expect(why).toMatch(/neither free \+ used \+ reserved = .* \(used excluding reserved\) nor free \+ used = .* \(used including it\) is within 460\.\d+MiB of total/);
    expect(reservedInUsed(broken)).toBeNull();
  });

  it('any consistent reading of either semantics is plausible and judged the same (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 8 * 1024, max: 192 * 1024 }),
        fc.integer({ min: 0, max: 2048 }),
        fc.double({ min: 0, max: 0.9, noNaN: true }),
        fc.boolean(),
        fc.integer({ min: 0, max: 8 }),
        (totalMiB, reservedMiB, share, r525, rounding) => {
          fc.pre(reservedMiB < totalMiB / 4);
          const usedMiB = Math.floor((totalMiB - reservedMiB - rounding) * share);
          const memory = reading(totalMiB, reservedMiB, usedMiB, r525, rounding);
          expect(implausibleMemory(memory)).toBeNull();
          // Within the rounding, reserved is never counted as used by processes, whatever the driver does.
          expect(Math.abs(usedExcludingReserved(memory) - usedMiB * MiB)).toBeLessThanOrEqual(reservedMiB <= 2 * rounding ? reservedMiB * MiB : 0);
        },
      ),
      SEED,
    );
  });
});
