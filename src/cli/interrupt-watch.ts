/**
 * SIGINT / SIGTERM / SIGHUP during a command: abort the wait (so it reports its last state and
 * exits 130 / 143 / 129), and if the command has not finished a second later (an NVML call stuck in the
 * driver), run the caller's last words and exit anyway. A second signal exits at once.
 */

import { monotonicMs } from '../monotonic-clock';
import { exitCodeForSignal, type InterruptSignal } from './exit-codes';
import { InterruptedError } from './interrupted-error';

export type { InterruptSignal } from './exit-codes';

/** The signals that interrupt a command, in one list. */
export const INTERRUPT_SIGNALS: readonly InterruptSignal[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** Watches for SIGINT / SIGTERM / SIGHUP while a command runs. */
export class InterruptWatch {
  /** How long an interrupted command gets to finish on its own before it is ended. */
  static readonly GRACE_MS = 1000;

  readonly controller = new AbortController();
  /** The signal received, if any. */
  received: InterruptSignal | null = null;
  /** When it arrived (monotonicMs()), for a report that says when, not when the command ended. */
  receivedAtMs: number | null = null;
  private readonly lastWords: (signal: InterruptSignal) => void;
  private readonly handlers: Array<[InterruptSignal, () => void]> = [];

  /** @param lastWords  logs the last state when the command must be ended from outside */
  constructor(lastWords: (signal: InterruptSignal) => void) {
    this.lastWords = lastWords;
    for (const signal of INTERRUPT_SIGNALS) {
      const handler = (): void => this.onSignal(signal);
      this.handlers.push([signal, handler]);
      process.on(signal, handler);
    }
  }

  /** The AbortSignal to pass to the wait. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Milliseconds from `startMs` to the signal's arrival (to now while none came). */
  signalledAfterMs(startMs: number): number {
    return (this.receivedAtMs ?? monotonicMs()) - startMs;
  }

  /** The exit code for the received signal. */
  exitCode(): number {
    return exitCodeForSignal(this.received ?? 'SIGTERM');
  }

  /** Stop watching (e.g. before handing signals to a wrapped command). */
  dispose(): void {
    for (const [signal, handler] of this.handlers) process.removeListener(signal, handler);
    this.handlers.length = 0;
  }

  private onSignal(signal: InterruptSignal): void {
    if (this.received !== null) {
      process.exit(this.exitCode());
    }
    this.received = signal;
    this.receivedAtMs = monotonicMs();
    this.controller.abort(new InterruptedError(signal));
    const timer = setTimeout(() => {
      this.lastWords(signal);
      process.exit(this.exitCode());
    }, InterruptWatch.GRACE_MS);
    timer.unref();
  }
}
