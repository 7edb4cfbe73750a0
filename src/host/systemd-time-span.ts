/**
 * systemd time spans as unit files write them (`RestartSec=10`, `TimeoutStartSec=5min 30s`) and
 * as `systemctl show` prints them (`RestartUSec=100ms`, `TimeoutStartUSec=1min 30s`,
 * `infinity`), in microseconds like systemd itself, so nothing is rounded twice.
 */

/** Microseconds per unit word, as systemd's parse_time() accepts them (months and years as it defines them). */
const USEC_PER: Readonly<Record<string, number>> = {
  us: 1, usec: 1, 'µs': 1, 'μs': 1,
  ms: 1e3, msec: 1e3,
  s: 1e6, sec: 1e6, second: 1e6, seconds: 1e6,
  m: 60e6, min: 60e6, minute: 60e6, minutes: 60e6,
  h: 3600e6, hr: 3600e6, hour: 3600e6, hours: 3600e6,
  d: 86_400e6, day: 86_400e6, days: 86_400e6,
  w: 604_800e6, week: 604_800e6, weeks: 604_800e6,
  M: 2_629_800e6, month: 2_629_800e6, months: 2_629_800e6,
  y: 31_557_600e6, year: 31_557_600e6, years: 31_557_600e6,
};

const PART_RE = /\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z\u00b5\u03bc]*)/y; // µ and μ, written as escapes: the bundled CLI is ASCII only

/**
 * Microseconds in `text`, `Infinity` for `infinity`, or null when systemd would reject it.
 * A number without a unit counts in `bareUnit` (seconds in unit files).
 */
export function parseTimeSpanUsec(text: string, bareUnit: 's' | 'us' = 's'): number | null {
  const trimmed = text.trim();
  if (trimmed === 'infinity') return Infinity;
  if (trimmed === '') return null;
  let total = 0;
  let position = 0;
  while (position < trimmed.length) {
    PART_RE.lastIndex = position;
    const match = PART_RE.exec(trimmed);
    if (match === null) return null;
    const unit = match[2] === '' ? bareUnit : match[2] ?? '';
    const per = USEC_PER[unit];
    if (per === undefined) return null;
    total += Number(match[1]) * per;
    position = PART_RE.lastIndex;
    while (trimmed[position] === ' ') position += 1;
  }
  return Math.round(total);
}

/** A span in systemd's own short words (`30min`, `1min 30s`, `100ms`, `infinity`), for messages. */
export function formatTimeSpanUsec(usec: number): string {
  if (usec === Infinity) return 'infinity';
  if (usec === 0) return '0';
  const parts: string[] = [];
  let rest = Math.round(usec);
  for (const [unit, per] of [['d', 86_400e6], ['h', 3600e6], ['min', 60e6], ['s', 1e6], ['ms', 1e3], ['us', 1]] as const) {
    if (rest >= per) {
      parts.push(`${Math.floor(rest / per)}${unit}`);
      rest %= per;
    }
  }
  return parts.join(' ');
}
