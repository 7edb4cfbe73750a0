/**
 * The command's stderr log: one line per event, `gpugate: <text>`, with a journald priority
 * prefix (`<3>` failure, `<4>` stale findings, `<5>` success, `<6>` progress, `<7>` detail)
 * only when stderr is the journal. `-q` keeps failures only; `-v` adds detail lines. A message
 * that already names the command (`gpugate wait: …`) gets no second prefix. A message of several
 * lines stays one line (` | `) for the journal and log files, and keeps its lines on a terminal.
 * On a terminal, lines are also wrapped to its width, and coloured by priority when asked.
 */

import { paint, wrapLine, type Style } from './terminal-style';
import { escapeForTerminal } from './terminal-text';

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

  /**
   * Write one event: one line (newlines inside `text` become ` | `, so one event stays one journal
   * entry), or on a terminal its lines, the later ones indented. Every other control character is
   * escaped (escapeForTerminal), so none reaches the terminal.
   */
  log(priority: PriorityValue, text: string): void {
    if (!this.enabled(priority)) return;
    const prefix = this.journal ? `<${priority}>` : '';
    // Messages may already start with "gpugate: " or "gpugate wait: ": do not say it twice.
    const named = /^gpugate(?: [a-z-]+)?: /.test(text) ? text : `gpugate: ${text}`;
    const lines = named.split(/\r?\n/).map((line) => escapeForTerminal(line.trimEnd())).filter((line, i) => i === 0 || line !== '');
    if (!this.terminal) {
      this.sink.write(`${prefix}${lines.map((line) => line.trim()).join(' | ')}\n`);
      return;
    }
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

  error(text: string): void { this.log(Priority.err, text); }
  warning(text: string): void { this.log(Priority.warning, text); }
  notice(text: string): void { this.log(Priority.notice, text); }
  info(text: string): void { this.log(Priority.info, text); }
  debug(text: string): void { this.log(Priority.debug, text); }
}
