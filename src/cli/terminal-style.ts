/**
 * How output looks on a terminal a person reads, and only there: colour when the stream is a TTY,
 * `NO_COLOR` is unset or empty (no-color.org) and `TERM` is not `dumb`; never in a pipe, a file or
 * the journal. Also the width lines are wrapped to.
 */

/** A stream as far as its terminal-ness goes. */
export interface MaybeTerminal {
  isTTY?: boolean | undefined;
  columns?: number | undefined;
}

/** Whether to colour what goes to `stream`. */
export function colourEnabled(stream: MaybeTerminal, env: NodeJS.ProcessEnv): boolean {
  if (stream.isTTY !== true) return false;
  if (env['NO_COLOR'] !== undefined && env['NO_COLOR'] !== '') return false;
  return env['TERM'] !== 'dumb';
}

/** Narrower than this, neither `COLUMNS` nor a terminal is believed. */
const NARROWEST = 20;

/**
 * The width to fit output to: `COLUMNS` when set to a number (the convention of ls and friends:
 * `COLUMNS=200 gpugate holders | grep …` keeps rows whole), else the terminal's, else 80.
 */
export function terminalWidth(stream: MaybeTerminal, env: NodeJS.ProcessEnv = {}): number {
  const columns = /^\d+$/.test(env['COLUMNS'] ?? '') ? Number(env['COLUMNS']) : undefined;
  if (columns !== undefined && columns >= NARROWEST) return columns;
  return typeof stream.columns === 'number' && stream.columns >= NARROWEST ? stream.columns : 80;
}

const CODES = { bold: 1, dim: 2, red: 31, green: 32, yellow: 33, blue: 34, magenta: 35, cyan: 36 } as const;

/** A colour or weight. */
export type Style = keyof typeof CODES;

/** Applies styles when `on`, else returns the text unchanged. */
export function paint(on: boolean, text: string, ...styles: Style[]): string {
  if (!on || styles.length === 0 || text === '') return text;
  return `\u001b[${styles.map((style) => CODES[style]).join(';')}m${text}\u001b[0m`;
}

/** The text without colour codes (for measuring its width). */
export function plain(text: string): string {
  return text.replace(/\u001b\[[0-9;]*m/g, '');
}

/**
 * Wraps one line to `width` at spaces outside double quotes (logfmt values stay whole where they
 * can), continuation lines indented by `indent`.
 */
export function wrapLine(text: string, width: number, indent = '    '): string {
  if (plain(text).length <= width) return text;
  // Leading blanks stay on the first line.
  const lead = /^ */.exec(text)?.[0] ?? '';
  const line = text.slice(lead.length);
  const words: string[] = [];
  let current = '';
  let quoted = false;
  for (const ch of line) {
    if (ch === '"') quoted = !quoted;
    if (ch === ' ' && !quoted) {
      words.push(current);
      current = '';
    } else {
      current += ch;
    }
  }
  words.push(current);
  const lines: string[] = [];
  let out = lead;
  for (const word of words) {
    const candidate = out === lead ? `${lead}${word}` : `${out} ${word}`;
    const limit = lines.length === 0 ? width : width - indent.length;
    if (plain(candidate).length <= limit || out === lead) {
      out = candidate;
    } else {
      lines.push(out);
      out = word;
    }
    // A single word longer than the line (a long quoted value): split it at spaces inside.
    while (plain(out).length > (lines.length === 0 ? width : width - indent.length) && out.includes(' ')) {
      const max = lines.length === 0 ? width : width - indent.length;
      const cut = out.lastIndexOf(' ', max);
      if (cut <= 0) break;
      lines.push(out.slice(0, cut));
      out = out.slice(cut + 1);
    }
  }
  lines.push(out);
  return lines.map((text, i) => (i === 0 ? text : `${indent}${text}`)).join('\n');
}
