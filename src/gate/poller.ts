/**
 * The shared poll: one snapshot per session per interval, fanned out to every waiter in the
 * process that watches the same session at the same interval. A poller starts with its first
 * subscriber, polls the union of the subscribers' devices (with process lists), and stops when
 * the last one leaves. Snapshot failures are delivered to every subscriber.
 */
import { performance } from 'node:perf_hooks';
import type { NvmlSession, Snapshot } from '../types';

/** One poll's outcome as delivered to subscribers. */
export type PollResult =
  | { kind: 'snapshot'; snapshot: Snapshot; /** monotonic ms (performance.now()) when it arrived */ receivedAtMs: number; /** the poll's sequence number */ sequence: number }
  | { kind: 'error'; error: unknown };

/** A subscriber callback. */
export type PollListener = (result: PollResult) => void;

interface Subscription {
  devices: number[];
  listener: PollListener;
}

const registry = new WeakMap<NvmlSession, Map<number, SnapshotPoller>>();

/** One poll loop for one (session, interval). Obtain it with SnapshotPoller.for(). */
export class SnapshotPoller {
  private readonly subscriptions = new Set<Subscription>();
  private timer: NodeJS.Timeout | null = null;
  private polling = false;
  private sequence = 0;
  private stopped = false;

  private constructor(
    private readonly session: NvmlSession,
    private readonly intervalMs: number,
  ) {}

  /** The poller shared by every waiter of `session` at `intervalMs`. */
  static for(session: NvmlSession, intervalMs: number): SnapshotPoller {
    let byInterval = registry.get(session);
    if (!byInterval) {
      byInterval = new Map();
      registry.set(session, byInterval);
    }
    let poller = byInterval.get(intervalMs);
    if (!poller || poller.stopped) {
      poller = new SnapshotPoller(session, intervalMs);
      byInterval.set(intervalMs, poller);
    }
    return poller;
  }

  /** Number of polls taken so far. */
  get polls(): number {
    return this.sequence;
  }

  /**
   * Adds a subscriber for `devices` (NVML indices). The first subscriber starts polling at once;
   * later ones receive the next poll. Returns the function that unsubscribes.
   */
  subscribe(devices: number[], listener: PollListener): () => void {
    const subscription: Subscription = { devices, listener };
    this.subscriptions.add(subscription);
    if (!this.polling && this.timer === null) this.schedule(0);
    return () => {
      this.subscriptions.delete(subscription);
      if (this.subscriptions.size === 0) this.stop();
    };
  }

  private stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const byInterval = registry.get(this.session);
    if (byInterval?.get(this.intervalMs) === this) byInterval.delete(this.intervalMs);
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.poll();
    }, delayMs);
  }

  private async poll(): Promise<void> {
    if (this.stopped || this.subscriptions.size === 0) return;
    this.polling = true;
    const startedMs = performance.now();
    const devices = [...new Set([...this.subscriptions].flatMap((s) => s.devices))].sort((a, b) => a - b);
    let result: PollResult;
    try {
      const snapshot = await this.session.snapshot({ processes: true, devices });
      this.sequence += 1;
      result = { kind: 'snapshot', snapshot, receivedAtMs: performance.now(), sequence: this.sequence };
    } catch (error) {
      result = { kind: 'error', error };
    }
    this.polling = false;
    for (const subscription of [...this.subscriptions]) {
      try {
        subscription.listener(result);
      } catch {
        // A subscriber's failure must not stop the others' polls.
      }
    }
    if (result.kind === 'error') {
      // Failures are final for every current subscriber; a later subscriber starts afresh.
      this.stop();
      return;
    }
    if (this.subscriptions.size > 0) this.schedule(Math.max(0, this.intervalMs - (performance.now() - startedMs)));
  }
}
