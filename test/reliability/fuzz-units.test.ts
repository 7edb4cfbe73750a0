/**
 * Fuzzing the size and duration parsers (src/units.ts) with fast-check: any string either parses
 * to a sane number or is rejected with a UsageError that quotes the input and says what was
 * expected; well-formed inputs parse to exactly the value they spell.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_DURATION_MS, parseDuration, parseSize, parseSizeOrFraction, parseSizeOrPercentage } from '../../src/units';
import { describeRuns, fuzzParameters } from './helpers/fuzz-settings';

const RUNS = 2000;
const printed: string[] = [];
afterAll(() => console.log(`fuzz (units): ${printed.join('; ')}`));

/** A bare number (no unit, no percent sign): a size parser may take it only for 0. */
const BARE_NUMBER = /^\s*(?:\d+(?:\.\d*)?|\.\d+)\s*$/;

/** Any text, weighted towards the characters these parsers care about. */
const unitText = fc.oneof(
  fc.string({ maxLength: 24 }),
  fc.string({ maxLength: 16, unit: fc.constantFrom('0', '1', '9', '.', ' ', '%', 'k', 'K', 'i', 'B', 'b', 'M', 'G', 'T', 'm', 's', 'h', '-', '+', 'e', 'x', '\t') }),
);

function expectUsageError(parse: (text: string) => unknown, text: string): void {
  let thrown: unknown = null;
  try {
    parse(text);
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(Error);
  const error = thrown as Error;
  expect(error.name).toBe('UsageError');
  expect(error.message).toContain(JSON.stringify(text));
  expect(error.message).toMatch(/expected|must|too large/);
}

function classify(parse: (text: string) => unknown, text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: parse(text) };
  } catch (error) {
    expectUsageError(parse, text);
    void error;
    return { ok: false };
  }
}

describe('size and duration strings (property)', () => {
  it('parseSize: a safe non-negative whole byte count, or a UsageError naming the input', () => {
    printed.push(describeRuns('parseSize', RUNS));
    fc.assert(
      fc.property(unitText, (text) => {
        const result = classify(parseSize, text);
        if (result.ok) {
          expect(Number.isSafeInteger(result.value)).toBe(true);
          expect(result.value as number).toBeGreaterThanOrEqual(0);
          if (BARE_NUMBER.test(text)) expect(result.value).toBe(0);
        }
      }),
      fuzzParameters(RUNS),
    );
  });

  it('parseDuration: a safe non-negative millisecond count, or a UsageError naming the input', () => {
    printed.push(describeRuns('parseDuration', RUNS));
    fc.assert(
      fc.property(unitText, (text) => {
        const result = classify(parseDuration, text);
        if (result.ok) {
          expect(Number.isSafeInteger(result.value)).toBe(true);
          expect(result.value as number).toBeGreaterThanOrEqual(0);
          expect(result.value as number).toBeLessThanOrEqual(MAX_DURATION_MS);
        }
      }),
      fuzzParameters(RUNS),
    );
  });

  it('parseSizeOrFraction: a bare fraction in (0, 1], a percentage as a fraction >= 0 (its range is the criterion check\'s), or a byte count, or a UsageError naming the input', () => {
    printed.push(describeRuns('parseSizeOrFraction', RUNS));
    fc.assert(
      fc.property(unitText, (text) => {
        const result = classify(parseSizeOrFraction, text);
        if (!result.ok) return;
        const value = result.value as { fraction?: number; bytes?: number };
        if ('fraction' in value && text.includes('%')) {
          expect(value.fraction).toBeGreaterThanOrEqual(0);
          expect(value.fraction).toBe(Number(text.trim().replace(/\s*%$/, '')) / 100);
        } else if ('fraction' in value) {
          expect(value.fraction).toBeGreaterThan(0);
          expect(value.fraction).toBeLessThanOrEqual(1);
        } else {
          expect(Number.isSafeInteger(value.bytes)).toBe(true);
          expect(value.bytes as number).toBeGreaterThanOrEqual(0);
          if (BARE_NUMBER.test(text)) expect(value.bytes).toBe(0);
        }
      }),
      fuzzParameters(RUNS),
    );
  });

  it('parseSizeOrPercentage: a percentage as a fraction >= 0 (its range is the criterion check\'s), a byte count (a bare number only 0), or a UsageError naming the input', () => {
    printed.push(describeRuns('parseSizeOrPercentage', RUNS));
    fc.assert(
      fc.property(unitText, (text) => {
        const result = classify(parseSizeOrPercentage, text);
        if (!result.ok) return;
        const value = result.value as { fraction?: number; bytes?: number };
        if ('fraction' in value) {
          expect(text).toContain('%');
          expect(value.fraction).toBe(Number(text.trim().replace(/\s*%$/, '')) / 100);
        } else {
          expect(Number.isSafeInteger(value.bytes)).toBe(true);
          expect(value.bytes as number).toBeGreaterThanOrEqual(0);
          if (BARE_NUMBER.test(text)) expect(value.bytes).toBe(0);
        }
      }),
      fuzzParameters(RUNS),
    );
  });

  it('well-formed sizes and durations parse to exactly what they spell, in any letter case and spacing', () => {
    const sizeUnits: Array<[string, number]> = [['B', 1], ['KiB', 1024], ['MiB', 1024 ** 2], ['GiB', 1024 ** 3], ['TiB', 1024 ** 4], ['KB', 1e3], ['MB', 1e6], ['GB', 1e9], ['TB', 1e12]];
    const durationUnits: Array<[string, number]> = [['ms', 1], ['s', 1000], ['m', 60_000], ['h', 3_600_000]];
    const caseOf = (text: string, upper: boolean[]): string => [...text].map((c, i) => (upper[i % upper.length] ? c.toUpperCase() : c.toLowerCase())).join('');
    printed.push(describeRuns('well-formed', RUNS / 4));
    fc.assert(
      fc.property(
        fc.nat(4096),
        fc.constantFrom(...sizeUnits),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 3 }),
        fc.constantFrom('', ' '),
        fc.array(fc.tuple(fc.integer({ min: 1, max: 999 }), fc.constantFrom(...durationUnits)), { minLength: 1, maxLength: 3 }),
        (count, [unit, multiplier], upper, space, parts) => {
          expect(parseSize(`${count}${space}${caseOf(unit, upper)}`)).toBe(count * multiplier);
          const text = parts.map(([n, [u]]) => `${n}${u}`).join('');
          const ms = parts.reduce((sum, [n, [, m]]) => sum + n * m, 0);
          // Up to the longest delay a timer holds, exactly what it spells; beyond it, refused naming the limit.
          if (ms <= MAX_DURATION_MS) expect(parseDuration(text)).toBe(ms);
          else expect(() => parseDuration(text)).toThrow(`${MAX_DURATION_MS} ms`);
        },
      ),
      fuzzParameters(RUNS / 4),
    );
  });
});
