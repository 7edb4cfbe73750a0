/**
 * The command's stderr log: one line per event, `gpugate: <text>`, with a journald priority
 * prefix (`<3>` failure, `<4>` stale findings, `<5>` success, `<6>` progress, `<7>` detail)
 * only when stderr is the journal. `-q` keeps failures only; `-v` adds detail lines.
 */

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

  /**
   * @param journal  emit `<N>` prefixes (see isJournalStream)
   * @param verbosity  quiet: priority ≤ 3 only; normal: ≤ 6; verbose: everything
   */
  constructor(options: { journal: boolean; verbosity: Verbosity; sink?: LogSink }) {
    this.journal = options.journal;
    this.verbosity = options.verbosity;
    this.sink = options.sink ?? process.stderr;
  }

  /** Whether a line of this priority would be written. */
  enabled(priority: PriorityValue): boolean {
    if (this.verbosity === 'quiet') return priority <= Priority.err;
    if (this.verbosity === 'normal') return priority <= Priority.info;
    return true;
  }

  /**
   * Write one line: newlines inside `text` are replaced, so one event stays one journal entry, and
   * every other control character is escaped (escapeForTerminal), so none reaches the terminal.
   */
  log(priority: PriorityValue, text: string): void {
    if (!this.enabled(priority)) return;
    const prefix = this.journal ? `<${priority}>` : '';
    // Library messages may already start with "gpugate: ": do not say it twice.
    const body = text.startsWith('gpugate: ') ? text.slice('gpugate: '.length) : text;
    this.sink.write(`${prefix}gpugate: ${escapeForTerminal(body.replace(/\r?\n/g, ' | '))}\n`);
  }

  error(text: string): void { this.log(Priority.err, text); }
  warning(text: string): void { this.log(Priority.warning, text); }
  notice(text: string): void { this.log(Priority.notice, text); }
  info(text: string): void { this.log(Priority.info, text); }
  debug(text: string): void { this.log(Priority.debug, text); }
}
