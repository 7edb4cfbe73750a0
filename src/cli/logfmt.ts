/**
 * logfmt rendering for log lines: `key=value` pairs separated by spaces. A value is quoted when it
 * is empty or contains whitespace, `"`, `=` or `\`, and inside the quotes only `"` and `\` are
 * escaped (`\"`, `\\`): the one escape every logfmt parser reads back (the npm `logfmt` parser
 * reads `\n` as a plain `n`). So no control character ever reaches the line raw: each is first
 * written as the visible escape a terminal shows (`\x1b`, `\u{202e}`, see terminal-text.ts), and
 * a parser returns that escaped text exactly. A log event is a name and its pairs; the log writes
 * it as `event=NAME key=value …` (logger.ts).
 */

import { escapeForTerminal } from './terminal-text';

/** A value logfmt can render; null and undefined render as nothing (the pair is dropped). */
export type LogfmtValue = string | number | boolean | null | undefined;

/** One log event: what happened, and its pairs; `text`, when given, is how a person at a terminal reads it instead. */
export interface LogEvent {
  event: string;
  pairs: ReadonlyArray<readonly [string, LogfmtValue]>;
  text?: string;
}

/** A log event named `event` with `pairs`. */
export function logEvent(event: string, pairs: ReadonlyArray<readonly [string, LogfmtValue]>, text?: string): LogEvent {
  return text === undefined ? { event, pairs } : { event, pairs, text };
}

/** Render one value: control characters as visible escapes, then quoted when needed. */
export function logfmtValue(value: string | number | boolean): string {
  const text = escapeForTerminal(String(value));
  if (text === '') return '""';
  if (!/[\s"=\\]/.test(text)) return text;
  return `"${text.replace(/["\\]/g, (c) => `\\${c}`)}"`;
}

/** Render `key=value` pairs in the order given, skipping null/undefined values. */
export function logfmt(pairs: ReadonlyArray<readonly [string, LogfmtValue]>): string {
  const parts: string[] = [];
  for (const [key, value] of pairs) {
    if (value === null || value === undefined) continue;
    parts.push(`${key}=${logfmtValue(value)}`);
  }
  return parts.join(' ');
}
