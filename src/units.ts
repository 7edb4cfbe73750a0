/**
 * Parsing and formatting of sizes, fractions and durations as users write them on the command
 * line and in options: `1.5GiB`, `500MB`, `0.9`, `90%`, `250ms`, `1m30s`. A bare number is never
 * guessed at: it is a fraction only where a fraction is the documented meaning (`--min-free`),
 * else refused (`0` excepted). Every parse error is a UsageError naming the input and what was
 * expected.
 */
import { UsageError } from './usage-error';

const SIZE_UNITS: Record<string, number> = {
  b: 1,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4,
  kb: 1000,
  mb: 1000 ** 2,
  gb: 1000 ** 3,
  tb: 1000 ** 4,
};

const DURATION_UNITS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/**
 * The longest duration gpugate accepts: 2^31 - 1 ms (about 24.8 days), the longest delay a Node
 * timer holds; a longer one would fire after 1 ms instead.
 */
export const MAX_DURATION_MS = 2_147_483_647;

const SIZE_EXPECTED = 'a size with a unit such as 512MiB, 1.5GiB, 2GB or 4096B (units: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB; a bare number is only accepted for 0)';
const DURATION_EXPECTED = 'a duration such as 500ms, 30s, 2m, 1h or 1m30s (a bare number is only accepted for 0)';
const SIZE_OR_FRACTION_EXPECTED = 'a fraction of total memory (0 < x < 1 such as 0.9, or a percentage such as 90%) or a size with a unit such as 2GiB';
const SIZE_OR_PERCENTAGE_EXPECTED = 'a size with a unit such as 1GiB or 512MiB, or a percentage of total memory such as 90% (a bare number is only accepted for 0)';

const NUMBER = '(?:\\d+(?:\\.\\d*)?|\\.\\d+)';
const SIZE_RE = new RegExp(`^(${NUMBER})\\s*([a-z]*)$`, 'i');
const DURATION_TOKEN_RE = new RegExp(`(${NUMBER})\\s*([a-z]*)\\s*`, 'iy');

/**
 * Parses a size into bytes. Binary (KiB…TiB) and decimal (KB…TB) units, any letter case,
 * decimals allowed (`1.5GiB`). A bare number is refused (bytes or a fraction would be a guess)
 * except `0`. Throws UsageError on anything else.
 */
export function parseSize(text: string): number {
  if (typeof text !== 'string') throw new UsageError(String(text), SIZE_EXPECTED);
  const trimmed = text.trim();
  const match = SIZE_RE.exec(trimmed);
  if (!match) throw new UsageError(text, SIZE_EXPECTED, `invalid size ${JSON.stringify(text)}: expected ${SIZE_EXPECTED}`);
  const value = Number(match[1]);
  const unitText = (match[2] ?? '').toLowerCase();
  const multiplier = unitText === '' ? 1 : SIZE_UNITS[unitText];
  if (multiplier === undefined) {
    throw new UsageError(text, SIZE_EXPECTED, `invalid size ${JSON.stringify(text)}: unknown unit ${JSON.stringify(match[2])}; expected ${SIZE_EXPECTED}`);
  }
  if (unitText === '' && value !== 0) {
    throw new UsageError(text, SIZE_EXPECTED, `invalid size ${JSON.stringify(text)}: a number needs a unit (for bytes write ${match[1]}B); expected ${SIZE_EXPECTED}`);
  }
  if (unitText === '' || unitText === 'b') {
    if (!Number.isInteger(value)) {
      throw new UsageError(text, SIZE_EXPECTED, `invalid size ${JSON.stringify(text)}: a byte count must be a whole number; expected ${SIZE_EXPECTED}`);
    }
  }
  const bytes = Math.round(value * multiplier);
  if (!Number.isSafeInteger(bytes)) {
    throw new UsageError(text, SIZE_EXPECTED, `invalid size ${JSON.stringify(text)}: too large; expected ${SIZE_EXPECTED}`);
  }
  return bytes;
}

/**
 * Parses a duration into milliseconds: one or more `<number><unit>` parts (`ms`, `s`, `m`, `h`),
 * e.g. `250ms`, `1.5s`, `1m30s`. A bare number is rejected (seconds or milliseconds would be a
 * guess) except `0`. Throws UsageError.
 */
export function parseDuration(text: string): number {
  if (typeof text !== 'string') throw new UsageError(String(text), DURATION_EXPECTED);
  const trimmed = text.trim();
  if (trimmed === '') throw new UsageError(text, DURATION_EXPECTED, `invalid duration ${JSON.stringify(text)}: expected ${DURATION_EXPECTED}`);
  if (/^0+(?:\.0*)?$/.test(trimmed)) return 0;
  let total = 0;
  let position = 0;
  DURATION_TOKEN_RE.lastIndex = 0;
  while (position < trimmed.length) {
    DURATION_TOKEN_RE.lastIndex = position;
    const match = DURATION_TOKEN_RE.exec(trimmed);
    if (!match) throw new UsageError(text, DURATION_EXPECTED, `invalid duration ${JSON.stringify(text)}: expected ${DURATION_EXPECTED}`);
    const unitText = (match[2] ?? '').toLowerCase();
    if (unitText === '') {
      throw new UsageError(text, DURATION_EXPECTED, `invalid duration ${JSON.stringify(text)}: a number needs a unit (ms, s, m or h); expected ${DURATION_EXPECTED}`);
    }
    const multiplier = DURATION_UNITS[unitText];
    if (multiplier === undefined) {
      throw new UsageError(text, DURATION_EXPECTED, `invalid duration ${JSON.stringify(text)}: unknown unit ${JSON.stringify(match[2])}; expected ${DURATION_EXPECTED}`);
    }
    total += Number(match[1]) * multiplier;
    position = DURATION_TOKEN_RE.lastIndex;
  }
  const ms = Math.round(total);
  if (!(ms <= MAX_DURATION_MS)) {
    throw new UsageError(text, DURATION_EXPECTED, `invalid duration ${JSON.stringify(text)}: too large; the longest accepted is ${formatDuration(MAX_DURATION_MS)} (${MAX_DURATION_MS} ms)`);
  }
  return ms;
}

/** A memory criterion: either a fraction of the GPU's total memory or an absolute byte count. */
export type SizeOrFraction = { fraction: number } | { bytes: number };

const PERCENT_RE = new RegExp(`^(${NUMBER})\\s*%$`);
const BARE_NUMBER_RE = new RegExp(`^${NUMBER}$`);

/**
 * A percentage (`90%`) as a fraction, null when `trimmed` is not one. Any value parses: which
 * fractions a criterion accepts is the criterion's to say (src/gate/criteria.ts), so `150%` is the
 * same configuration error as the library's `{ fraction: 1.5 }`, not a malformed value.
 */
function percentageOf(trimmed: string): { fraction: number } | null {
  const percent = PERCENT_RE.exec(trimmed);
  return percent ? { fraction: Number(percent[1]) / 100 } : null;
}

/** parseSize of `trimmed`, its failure reworded for the caller's grammar. */
function sizeIn(text: string, trimmed: string, expected: string): { bytes: number } {
  try {
    return { bytes: parseSize(trimmed) };
  } catch (error) {
    if (error instanceof UsageError) throw new UsageError(text, expected, `invalid value ${JSON.stringify(text)}: expected ${expected}`);
    throw error;
  }
}

/**
 * Parses a fraction of total memory or a size, as `--min-free` takes it: a bare number
 * 0 < x <= 1 or a percentage (`90%`) is a fraction, `0` is no bytes, and anything
 * else must be a size with a unit (see parseSize). A bare number above 1 is refused: neither a
 * fraction nor a byte count without a unit. (A fraction of 1 parses; no GPU can ever have all of
 * its memory free, so the criteria check refuses it as a ConfigError.)
 */
export function parseSizeOrFraction(text: string): SizeOrFraction {
  if (typeof text !== 'string') throw new UsageError(String(text), SIZE_OR_FRACTION_EXPECTED);
  const trimmed = text.trim();
  const percent = percentageOf(trimmed);
  if (percent !== null) return percent;
  if (BARE_NUMBER_RE.test(trimmed)) {
    const value = Number(trimmed);
    if (value > 0 && value <= 1) return { fraction: value };
    if (value > 1) {
      throw new UsageError(text, SIZE_OR_FRACTION_EXPECTED, `invalid value ${JSON.stringify(text)}: a bare number is a fraction of total memory and must be at most 1; for a size write a unit (${trimmed}B, ${trimmed}GiB); expected ${SIZE_OR_FRACTION_EXPECTED}`);
    }
  }
  return sizeIn(text, trimmed, SIZE_OR_FRACTION_EXPECTED);
}

/**
 * Parses a size or a percentage of total memory, as `--max-used` takes it: `90%` is a fraction, anything else must be a size with a unit, or `0` (see parseSize). A bare number
 * is refused: `1` read as a fraction would allow every byte, read as bytes almost none.
 */
export function parseSizeOrPercentage(text: string): SizeOrFraction {
  if (typeof text !== 'string') throw new UsageError(String(text), SIZE_OR_PERCENTAGE_EXPECTED);
  const trimmed = text.trim();
  return percentageOf(trimmed) ?? sizeIn(text, trimmed, SIZE_OR_PERCENTAGE_EXPECTED);
}

const FORMAT_UNITS: Array<[string, number]> = [
  ['TiB', 1024 ** 4],
  ['GiB', 1024 ** 3],
  ['MiB', 1024 ** 2],
  ['KiB', 1024],
];

function trimDecimal(value: number): string {
  const text = value.toFixed(1);
  return text.endsWith('.0') ? text.slice(0, -2) : text;
}

/** Formats bytes for humans with binary units and one decimal, e.g. `91.8GiB`, `512MiB`, `12B`. */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return String(bytes);
  const sign = bytes < 0 ? '-' : '';
  const magnitude = Math.abs(bytes);
  for (const [unit, size] of FORMAT_UNITS) {
    // Use the unit once the value rounds to at least 1 of it (never print "1024MiB").
    // Plain bytes stay exact below 1 KiB.
    if (size === 1024 ? magnitude >= size : Number((magnitude / size).toFixed(1)) >= 1) return `${sign}${trimDecimal(magnitude / size)}${unit}`;
  }
  return `${sign}${Math.round(magnitude)}B`;
}

/**
 * `3 min`, `42 s`, `5 h`, `3 days`: how long ago something started, at the precision a person
 * reads it (a holder's age). formatDuration below is the exact form, for windows and deadlines.
 */
export function formatAge(ms: number): string {
  const seconds = Math.floor(Math.max(0, ms) / 1000);
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours} h`;
  return `${Math.floor(hours / 24)} days`;
}

/** Formats milliseconds for humans: `250ms`, `1.5s`, `12s`, `2m30s`, `1h5m`. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  const sign = ms < 0 ? '-' : '';
  const value = Math.abs(ms);
  // Truncated, never rounded up: a window of 999.6 ms is not "1000ms", nor 59.97 s "60s".
  if (value < 1000) return `${sign}${Math.floor(value)}ms`;
  if (value < 60_000) return `${sign}${trimDecimal(Math.floor(value / 100) / 10)}s`;
  const totalSeconds = Math.floor(value / 1000);
  if (totalSeconds < 3600) {
    const minutes = Math.floor(totalSeconds / 60);
    const seconds = totalSeconds % 60;
    return `${sign}${minutes}m${seconds === 0 ? '' : `${seconds}s`}`;
  }
  const hours = Math.floor(totalSeconds / 3600);
  const minutes = Math.floor((totalSeconds % 3600) / 60);
  return `${sign}${hours}h${minutes === 0 ? '' : `${minutes}m`}`;
}
