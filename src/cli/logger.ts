/**
 * The command's stderr log: one line per event, with a journald priority prefix (`<3>` failure,
 * `<4>` stale findings, `<5>` success, `<6>` progress, `<7>` detail) only when stderr is the
 * journal. `-q` keeps failures only; `-v` adds detail lines.
 *
 * In a pipe, a file or the journal every line is logfmt that a logfmt parser reads whole: an
 * event is `event=NAME key=value …` (logfmt.ts), any other message `msg="…"` (its lines joined
 * with ` | `, so one event stays one journal entry). On a terminal the same events are
 * written for a person: `gpugate: NAME key=value …` or the message itself, a message of several
 * lines keeping its lines, long lines wrapped to the terminal's width, coloured by priority when
 * asked. Either way every character a terminal would act on is escaped (escapeForTerminal).
 */

import { paint, wrapLine, type Style } from './terminal-style';
import { escapeForTerminal } from './terminal-text';
import { logfmt, type LogEvent } from './logfmt';

/** syslog priorities as journald reads them from a `<N>` prefix. */
export const Priority = { err: 3, warning: 4, notice: 5, info: 6, debug: 7 } as const;

/** One of {@link Priority}'s values. */
export type PriorityValue = (typeof Priority)[keyof typeof Priority];

/** How much to log. */
export type Verbosity = 'quiet' | 'normal' | 'verbose';

/** Where log lines go; stderr by default. */
export interface LogSink {
  write(text: string): unknown;
}

/** Writes prioritised lines to stderr. */
export class Logger {
  private readonly journal: boolean;
  private readonly verbosity: Verbosity;
  private readonly sink: LogSink;
  private readonly terminal: boolean;
  private readonly width: number;
  private readonly colour: boolean;

  /**
   * @param journal  emit `<N>` prefixes (see isJournalStream)
   * @param verbosity  quiet: priority ≤ 3 only; normal: ≤ 6; verbose: everything
   * @param terminal  a person reads the sink: multi-line messages keep their lines, long lines are
   *   wrapped to `width` (default 80), progress lines are compact, `colour` colours them
   */
  constructor(options: { journal: boolean; verbosity: Verbosity; sink?: LogSink; terminal?: boolean; width?: number; colour?: boolean }) {
    this.journal = options.journal;
    this.verbosity = options.verbosity;
    this.sink = options.sink ?? process.stderr;
    this.terminal = options.terminal === true && !options.journal;
    this.width = options.width ?? 80;
    this.colour = this.terminal && options.colour === true;
  }

  /** Progress lines leave out what a person at a terminal does not need on every line (UUID, bus id). */
  get compact(): boolean {
    return this.terminal;
  }

  /** Whether a line of this priority would be written. */
  enabled(priority: PriorityValue): boolean {
    if (this.verbosity === 'quiet') return priority <= Priority.err;
    if (this.verbosity === 'normal') return priority <= Priority.info;
    return true;
  }

  /** Write one event (see the top of this file for its two forms). */
  log(priority: PriorityValue, entry: string | LogEvent): void {
    if (!this.enabled(priority)) return;
    if (!this.terminal) {
      const prefix = this.journal ? `<${priority}>` : '';
      this.sink.write(`${prefix}${machineLine(entry)}\n`);
      return;
    }
    const text = typeof entry === 'string' ? entry : entry.text ?? `${entry.event} ${logfmt(entry.pairs)}`;
    // Messages may already start with "gpugate: " or "gpugate wait: ": do not say it twice.
    const named = /^gpugate(?: [a-z-]+)?: /.test(text) ? text : `gpugate: ${text}`;
    const lines = named.split(/\r?\n/).map((line) => escapeForTerminal(line.trimEnd())).filter((line, i) => i === 0 || line !== '');
    const [first = '', ...rest] = lines;
    const wrapped = [wrapLine(first, this.width), ...rest.map((line) => wrapLine(`  ${line.trimStart()}`, this.width))].join('\n');
    this.sink.write(`${this.coloured(priority, wrapped)}\n`);
  }

  /** Colours by priority the event word of a progress line (`waiting gpu=…`), else the prefix. */
  private coloured(priority: PriorityValue, text: string): string {
    if (!this.colour) return text;
    const match = /^(gpugate(?: [a-z-]+)?:)(?:( [a-z-]+)(?= [\w-]+=))?/.exec(text);
    if (match === null) return text;
    const event = match[2];
    const style: Style[] = priority <= Priority.err ? ['red', 'bold'] : priority === Priority.warning ? ['yellow', 'bold']
      : priority === Priority.notice || event === ' ready' ? ['green', 'bold'] : priority === Priority.debug ? ['dim'] : ['cyan'];
    if (event === undefined) return `${paint(true, match[1] as string, ...style)}${text.slice(match[0].length)}`;
    return `${paint(true, match[1] as string, 'dim')}${paint(true, event, ...style)}${text.slice(match[0].length)}`;
  }

  error(entry: string | LogEvent): void { this.log(Priority.err, entry); }
  warning(entry: string | LogEvent): void { this.log(Priority.warning, entry); }
  notice(entry: string | LogEvent): void { this.log(Priority.notice, entry); }
  info(entry: string | LogEvent): void { this.log(Priority.info, entry); }
  debug(entry: string | LogEvent): void { this.log(Priority.debug, entry); }
}

/** One logfmt line: `event=NAME key=value …`, or `msg="…"` for a message (without its `gpugate: `). */
function machineLine(entry: string | LogEvent): string {
  if (typeof entry !== 'string') {
    const pairs = entry.pairs.map(([key, value]) => [key, typeof value === 'string' ? oneLine(value) : value] as const);
    return logfmt([['event', entry.event], ...pairs]);
  }
  return logfmt([['msg', oneLine(entry.replace(/^gpugate: /, ''))]]);
}

/**
 * Text on one line, so that one event stays one journal entry: its lines trimmed, blank lines
 * after the first dropped (as on a terminal), and joined with ` | `; logfmtValue then writes every
 * other control character as its visible escape.
 */
function oneLine(text: string): string {
  return text.split(/\r?\n/).map((line) => line.trimEnd()).filter((line, i) => i === 0 || line !== '').map((line) => line.trim()).join(' | ');
}
