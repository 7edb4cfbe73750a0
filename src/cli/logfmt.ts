/**
 * logfmt rendering for log lines: `key=value` pairs separated by spaces, values quoted (with `"`
 * and `\` escaped, a newline as `\n`, other controls as `\u00XX`) only when they contain a space,
 * a quote, `=`, a backslash or a control character. A log event is a name and its pairs; the log
 * writes it as `event=NAME key=value …` (logger.ts).
 */

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

/** Render one value, quoting it when needed. */
export function logfmtValue(value: string | number | boolean): string {
  const text = String(value);
  if (text === '') return '""';
  if (!/[\s"=\\\u0000-\u001f\u007f]/.test(text)) return text;
  const escaped = text.replace(/["\\]/g, (c) => `\\${c}`).replace(/[\u0000-\u001f\u007f]/g, (c) => {
    if (c === '\n') return '\\n';
    if (c === '\t') return '\\t';
    return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
  });
  return `"${escaped}"`;
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
