import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { formatBytes, formatDuration, MAX_DURATION_MS, parseDuration, parseSize, parseSizeOrFraction, parseSizeOrPercentage } from '../../src/units';
import { UsageError } from '../../src/usage-error';
import { thrownBy } from '../helpers/thrown-by';

const SEED = { seed: 20261129, numRuns: 300 };

function usageErrorOf(fn: () => unknown): UsageError {
  return thrownBy(fn, UsageError);
}

describe('parseSize', () => {
  it('reads binary and decimal units, decimals, and a bare 0', () => {
    expect(parseSize('0')).toBe(0);
    expect(parseSize('512B')).toBe(512);
    expect(parseSize('12B')).toBe(12);
    expect(parseSize('1KiB')).toBe(1024);
    expect(parseSize('256MiB')).toBe(256 * 1024 ** 2);
    expect(parseSize('1.5GiB')).toBe(1.5 * 1024 ** 3);
    expect(parseSize('2TiB')).toBe(2 * 1024 ** 4);
    expect(parseSize('2GB')).toBe(2e9);
    expect(parseSize('3 mb')).toBe(3e6);
    expect(parseSize(' 1gib ')).toBe(1024 ** 3);
  });

  it('rejects garbage with a message naming the input and the accepted units', () => {
    for (const bad of ['', 'abc', '1.5', '-1GiB', '1 GiBs', '1G', '1e3', 'GiB', '1..5GiB']) {
      const error = usageErrorOf(() => parseSize(bad));
      expect(error.input).toBe(bad);
      expect(error.message).toContain(JSON.stringify(bad));
      expect(error.message).toMatch(/GiB/);
    }
  });

  it('rejects a bare number other than 0 and says a unit is needed', () => {
    for (const bad of ['512', '1', '2', '0.5', '4096']) {
      const error = usageErrorOf(() => parseSize(bad));
      expect(error.input).toBe(bad);
      expect(error.message).toContain(JSON.stringify(bad));
      expect(error.message).toMatch(/needs a unit/);
      expect(error.expected).toMatch(/bare number is only accepted for 0/);
    }
  });

  it('rejects sizes beyond exact integers', () => {
    expect(() => parseSize('100000000TiB')).toThrow(/too large/);
  });

  it('round-trips whole multiples of every unit (property)', () => {
    const units: Array<[string, number]> = [['B', 1], ['KiB', 1024], ['MiB', 1024 ** 2], ['GiB', 1024 ** 3], ['KB', 1e3], ['MB', 1e6], ['GB', 1e9]];
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 4096 }), fc.constantFrom(...units), (n, [unit, size]) => {
        expect(parseSize(`${n}${unit}`)).toBe(n * size);
      }),
      SEED,
    );
  });

  it('never throws anything but UsageError on arbitrary text (property)', () => {
    fc.assert(
      fc.property(fc.string(), (text) => {
        try {
          const bytes = parseSize(text);
          expect(Number.isSafeInteger(bytes)).toBe(true);
          expect(bytes).toBeGreaterThanOrEqual(0);
        } catch (error) {
          expect(error).toBeInstanceOf(UsageError);
        }
      }),
      SEED,
    );
  });
});

describe('parseDuration', () => {
  it('reads ms, s, m, h and compounds', () => {
    expect(parseDuration('250ms')).toBe(250);
    expect(parseDuration('1.5s')).toBe(1500);
    expect(parseDuration('2m')).toBe(120_000);
    expect(parseDuration('1h')).toBe(3_600_000);
    expect(parseDuration('1m30s')).toBe(90_000);
    expect(parseDuration('0')).toBe(0);
  });

  it('rejects a bare number other than 0 and says a unit is needed', () => {
    const error = usageErrorOf(() => parseDuration('30'));
    expect(error.message).toContain('"30"');
    expect(error.message).toMatch(/unit/);
    expect(error.expected).toMatch(/bare number/);
  });

  it('accepts up to the longest delay a timer holds and rejects anything longer, naming the limit', () => {
    expect(MAX_DURATION_MS).toBe(2 ** 31 - 1);
    expect(parseDuration(`${MAX_DURATION_MS}ms`)).toBe(MAX_DURATION_MS);
    expect(parseDuration('596h')).toBe(596 * 3_600_000);
    for (const long of [`${MAX_DURATION_MS + 1}ms`, '600h', '1000h', '596h32m']) {
      const error = usageErrorOf(() => parseDuration(long));
      expect(error.message).toContain(JSON.stringify(long));
      expect(error.message).toContain(`${MAX_DURATION_MS} ms`);
    }
  });

  it('rejects unknown units and junk', () => {
    for (const bad of ['', '5 days', '5d', 's', '-1s', '1s garbage']) {
      const error = usageErrorOf(() => parseDuration(bad));
      expect(error.input).toBe(bad);
    }
  });

  it('sums unit parts (property)', () => {
    fc.assert(
      fc.property(fc.nat(100), fc.nat(59), fc.nat(999), (m, s, ms) => {
        expect(parseDuration(`${m}m${s}s${ms}ms`)).toBe(m * 60_000 + s * 1000 + ms);
      }),
      SEED,
    );
  });
});

describe('parseSizeOrPercentage', () => {
  it('takes percentages as fractions and sizes with a unit as sizes', () => {
    expect(parseSizeOrPercentage('5%')).toEqual({ fraction: 0.05 });
    expect(parseSizeOrPercentage('100%')).toEqual({ fraction: 1 });
    expect(parseSizeOrPercentage('1GiB')).toEqual({ bytes: 1024 ** 3 });
    expect(parseSizeOrPercentage('0')).toEqual({ bytes: 0 });
  });

  it('rejects every bare number but 0, naming the input and both accepted forms', () => {
    for (const bad of ['1', '2', '0.95', '0.5', '1073741824']) {
      const error = usageErrorOf(() => parseSizeOrPercentage(bad));
      expect(error.message).toContain(JSON.stringify(bad));
      expect(error.expected).toMatch(/size with a unit.*percentage/);
    }
    expect(usageErrorOf(() => parseSizeOrPercentage('x')).message).toContain('"x"');
  });

  it('parses a percentage whatever its value: the criterion check judges the range (0%, 150%: resolveCriteria)', () => {
    expect(parseSizeOrPercentage('0%')).toEqual({ fraction: 0 });
    expect(parseSizeOrPercentage('150%')).toEqual({ fraction: 1.5 });
  });
});

describe('parseSizeOrFraction', () => {
  it('takes a bare 0 < x <= 1 and percentages as fractions, sizes with a unit as sizes', () => {
    expect(parseSizeOrFraction('0.9')).toEqual({ fraction: 0.9 });
    expect(parseSizeOrFraction('1')).toEqual({ fraction: 1 });
    expect(parseSizeOrFraction('90%')).toEqual({ fraction: 0.9 });
    expect(parseSizeOrFraction('2GiB')).toEqual({ bytes: 2 * 1024 ** 3 });
    expect(parseSizeOrFraction('0')).toEqual({ bytes: 0 });
    expect(parseSizeOrFraction('4096B')).toEqual({ bytes: 4096 });
  });

  it('rejects a bare number above 1: neither a fraction nor a byte count without a unit', () => {
    for (const bad of ['4096', '2', '1.5']) {
      const error = usageErrorOf(() => parseSizeOrFraction(bad));
      expect(error.message).toContain(JSON.stringify(bad));
      expect(error.message).toMatch(/at most 1; for a size write a unit/);
    }
  });

  it('parses a percentage whatever its value (the criterion check judges the range), and rejects junk naming both accepted forms', () => {
    expect(parseSizeOrFraction('0%')).toEqual({ fraction: 0 });
    expect(parseSizeOrFraction('101%')).toEqual({ fraction: 1.01 });
    for (const bad of ['x', '1.5', '4096']) {
      const error = usageErrorOf(() => parseSizeOrFraction(bad));
      expect(error.message).toContain(JSON.stringify(bad));
    }
    expect(usageErrorOf(() => parseSizeOrFraction('nope')).expected).toMatch(/fraction.*size/);
  });

  it('maps every fraction in (0, 1] to itself (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 }), (k) => {
        const fraction = k / 1000;
        expect(parseSizeOrFraction(String(fraction))).toEqual({ fraction });
        const percent = parseSizeOrFraction(`${k / 10}%`);
        expect('fraction' in percent && percent.fraction).toBeCloseTo(fraction, 12);
      }),
      SEED,
    );
  });
});

describe('formatBytes / formatDuration', () => {
  it('formats with binary units and one decimal', () => {
    expect(formatBytes(0)).toBe('0B');
    expect(formatBytes(1023)).toBe('1023B');
    expect(formatBytes(1024 ** 3)).toBe('1GiB');
    expect(formatBytes(Math.round(91.8 * 1024 ** 3))).toBe('91.8GiB');
    expect(formatBytes(1024 ** 3 - 1)).toBe('1GiB');
    expect(formatBytes(256 * 1024 ** 2)).toBe('256MiB');
  });

  it('formats durations', () => {
    expect(formatDuration(250)).toBe('250ms');
    expect(formatDuration(1500)).toBe('1.5s');
    expect(formatDuration(12_000)).toBe('12s');
    expect(formatDuration(150_000)).toBe('2m30s');
    expect(formatDuration(3_900_000)).toBe('1h5m');
  });

  it('never prints a duration longer than it was (a window just under 1 s is not "1000ms")', () => {
    expect(formatDuration(999.6)).toBe('999ms');
    expect(formatDuration(1999)).toBe('1.9s');
    expect(formatDuration(59_970)).toBe('59.9s');
    expect(formatDuration(119_999)).toBe('1m59s');
    fc.assert(
      fc.property(fc.double({ min: 0, max: 1e8, noNaN: true }), (ms) => {
        expect(parseDuration(formatDuration(ms))).toBeLessThanOrEqual(ms);
      }),
      SEED,
    );
  });

  it('formatBytes output parses back within 5% (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 ** 50 }), (bytes) => {
        const back = parseSize(formatBytes(bytes));
        expect(Math.abs(back - bytes) / bytes).toBeLessThan(0.05);
      }),
      SEED,
    );
  });
});
