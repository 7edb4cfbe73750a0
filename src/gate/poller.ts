/**
 * The shared poll: one snapshot per session per interval, fanned out to every waiter in the
 * process that watches the same session at the same interval. A poller starts with its first
 * subscriber, polls the union of the subscribers' devices, and stops when the last one leaves.
 * Each poll reads only what some subscriber needs for its next decision (see {@link ReadPlan}):
 * memory always, process lists and the compute mode only when asked. A subscriber about to
 * decide "ready" on memory alone asks for a {@link SnapshotPoller.refine} read that confirms it
 * with every field it decides on; concurrent requests share one read. Snapshot failures are
 * delivered to every subscriber.
 */
import { monotonicMs } from '../monotonic-clock';
import type { NvmlSession, Snapshot, SnapshotOptions } from '../types';

/** What one read of the GPUs includes besides memory. */
export interface ReadPlan {
  /** The process lists. */
  processes: boolean;
  /** The compute mode. */
  computeMode: boolean;
  /** Every field, MIG instances included (a MIG instance's memory is read only this way). */
  full: boolean;
}

/** One poll's outcome as delivered to subscribers. */
export type PollResult =
  | {
      kind: 'snapshot';
      snapshot: Snapshot;
      /** What the read included (the snapshot may hold more, e.g. from a session that reads everything). */
      plan: ReadPlan;
      /** monotonic ms (monotonicMs()) when it arrived */
      receivedAtMs: number;
      /** the poll's sequence number */
      sequence: number;
    }
  | { kind: 'error'; error: unknown };

/** A subscriber callback. */
export type PollListener = (result: PollResult) => void;

interface Subscription {
  devices: number[];
  listener: PollListener;
  plan: () => ReadPlan;
}

interface Refinement {
  devices: Set<number>;
  plan: ReadPlan;
  result: Promise<PollResult>;
}

const registry = new WeakMap<NvmlSession, Map<number, SnapshotPoller>>();

/** The union of two plans. */
export function mergePlans(a: ReadPlan, b: ReadPlan): ReadPlan {
  return { processes: a.processes || b.processes, computeMode: a.computeMode || b.computeMode, full: a.full || b.full };
}

/** The snapshot options that read `devices` per `plan`. */
export function snapshotOptionsFor(plan: ReadPlan, devices: number[]): SnapshotOptions {
  if (plan.full) return { processes: plan.processes, devices };
  return { memoryOnly: true, computeMode: plan.computeMode, processes: plan.processes, devices };
}

/** One poll loop for one (session, interval). Obtain it with SnapshotPoller.for(). */
export class SnapshotPoller {
  private readonly subscriptions = new Set<Subscription>();
  private timer: NodeJS.Timeout | null = null;
  private polling = false;
  private sequence = 0;
  private stopped = false;
  private refinement: Refinement | null = null;

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
   * Adds a subscriber for `devices` (NVML indices); `plan` says, before each poll, what it needs
   * read. The first subscriber starts polling after `firstDelayMs` (default at once); later ones
   * receive the next poll. Returns the function that unsubscribes.
   */
  subscribe(devices: number[], listener: PollListener, plan: () => ReadPlan, firstDelayMs = 0): () => void {
    const subscription: Subscription = { devices, listener, plan };
    this.subscriptions.add(subscription);
    if (!this.polling && this.timer === null) this.schedule(firstDelayMs);
    return () => {
      this.subscriptions.delete(subscription);
      if (this.subscriptions.size === 0) this.stop();
    };
  }

  /**
   * An extra read of `devices` per `plan`, outside the poll schedule: what a subscriber needs to
   * confirm a decision. Requests made before the read starts (within the same turn of the event
   * loop, as when one poll makes several waiters ready) share it.
   */
  refine(devices: number[], plan: ReadPlan): Promise<PollResult> {
    const pending = this.refinement;
    if (pending !== null) {
      for (const index of devices) pending.devices.add(index);
      pending.plan = mergePlans(pending.plan, plan);
      return pending.result;
    }
    const refinement: Refinement = { devices: new Set(devices), plan, result: Promise.resolve({ kind: 'error', error: null }) };
    refinement.result = new Promise<PollResult>((resolve) => {
      setImmediate(() => {
        this.refinement = null;
        const indices = [...refinement.devices].sort((a, b) => a - b);
        void this.read(indices, refinement.plan, this.sequence).then(resolve);
      });
    });
    this.refinement = refinement;
    return refinement.result;
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

  private async read(devices: number[], plan: ReadPlan, sequence: number): Promise<PollResult> {
    try {
      const snapshot = await this.session.snapshot(snapshotOptionsFor(plan, devices));
      return { kind: 'snapshot', snapshot, plan, receivedAtMs: monotonicMs(), sequence };
    } catch (error) {
      return { kind: 'error', error };
    }
  }

  private async poll(): Promise<void> {
    if (this.stopped || this.subscriptions.size === 0) return;
    this.polling = true;
    const startedMs = monotonicMs();
    const subscriptions = [...this.subscriptions];
    const devices = [...new Set(subscriptions.flatMap((s) => s.devices))].sort((a, b) => a - b);
    let plan: ReadPlan = { processes: false, computeMode: false, full: false };
    for (const subscription of subscriptions) plan = mergePlans(plan, subscription.plan());
    const result = await this.read(devices, plan, this.sequence + 1);
    if (result.kind === 'snapshot') this.sequence += 1;
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
    if (this.subscriptions.size > 0) this.schedule(Math.max(0, this.intervalMs - (monotonicMs() - startedMs)));
  }
}
