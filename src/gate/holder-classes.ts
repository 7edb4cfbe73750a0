/**
 * The holder classes, written once: every class the stale scan (stale.ts) gives a process NVML
 * lists, whether it is stale, whether its memory is still coming back by itself, whether it is a
 * live process that stays, what it means and what gpugate does about it. The class type, the
 * sets the gate uses, `--help` and the Prometheus help derive from this list; the JSON schema's
 * enum and the docs' holders table are checked against it by test/gate/holder-classes.test.ts.
 */

/** One holder class. */
export interface HolderClassRecord {
  /** The class as JSON, logs and metrics spell it. */
  readonly name: string;
  /** Left behind by an earlier run: reported as stale, failed on by `--stale fail`, never handed out by `select`. */
  readonly stale: boolean;
  /**
   * Its memory is still to come back by itself (a process exiting or already gone whose context
   * the driver is tearing down). Drivers give such memory back in one step, so memory that holds
   * still proves nothing while one is listed.
   */
  readonly releasing: boolean;
  /** A live process that is not going away by itself: its memory is settled. */
  readonly live: boolean;
  /** What the class means (the docs' "meaning" column). */
  readonly meaning: string;
  /** What gpugate does about such a holder (the docs' "what gpugate does" column). */
  readonly action: string;
}

/** Every holder class, in the order reports and metrics list them. */
export const HOLDER_CATALOGUE = [
  {
    name: 'active', stale: false, releasing: false, live: true,
    meaning: 'a live process using the GPU',
    action: 'waits for it',
  },
  {
    name: 'draining', stale: false, releasing: true, live: false,
    meaning: "exiting (state D or the kernel's exiting flag): its memory is coming back",
    action: 'waits; never signals it',
  },
  {
    name: 'zombie', stale: true, releasing: true, live: false,
    meaning: 'exited, not yet reaped by its parent (the line names the parent)',
    action: 'waits; reports the parent',
  },
  {
    name: 'zombie_live_threads', stale: true, releasing: false, live: false,
    meaning: 'its main thread exited, other threads still run',
    action: 'a live holder: reports it; never signals it',
  },
  {
    name: 'gone', stale: false, releasing: true, live: false,
    meaning: 'NVML lists it but no such process exists: the driver is tearing it down',
    action: 'waits',
  },
  {
    name: 'unverifiable', stale: false, releasing: false, live: false,
    meaning: "nested PID namespace (by `NSpid`, or a PID namespace other than the initial one), a `/proc` of another PID namespace, a missing pid under a `/proc` mounted with `hidepid` (the procfs mounted last at `/proc` counts), or an unreadable `/proc` entry; or a process of gpugate's own unit whose activation or identity is in doubt (started after the snapshot, no `/dev/nvidia*` descriptor, no `INVOCATION_ID` to compare and not started before this activation)",
    action: 'says so; never calls it dead; never signals it',
  },
  {
    name: 'leftover', stale: true, releasing: false, live: false,
    meaning: "a process in gpugate's own systemd unit cgroup (or below it) started by an earlier activation of the unit (see below)",
    action: 'reports; `--kill-stale` may signal it',
  },
  {
    name: 'orphan', stale: true, releasing: false, live: false,
    meaning: "reparented to PID 1 or a subreaper, command line of an engine worker (`VLLM::…`, `sglang::…`), not in another service's cgroup",
    action: 'reports; signals only if also a proven leftover',
  },
  {
    name: 'foreign', stale: false, releasing: false, live: true,
    meaning: "a live holder in another cgroup (another service, MPS, DCGM); an engine in another `.service` cgroup is `foreign` even with PPID 1, since systemd starts every service's main process that way",
    action: 'reports; never kills',
  },
] as const satisfies readonly HolderClassRecord[];

/** One of the classes of {@link HOLDER_CATALOGUE}. */
export type HolderClass = (typeof HOLDER_CATALOGUE)[number]['name'];

/** The class names, in catalogue order. */
export const HOLDER_CLASSES: readonly HolderClass[] = HOLDER_CATALOGUE.map((record) => record.name);

/** The classes whose record has `flag` set. */
function classesWith(flag: 'stale' | 'releasing' | 'live'): ReadonlySet<HolderClass> {
  return new Set(HOLDER_CATALOGUE.filter((record) => record[flag]).map((record) => record.name));
}

/** Classes that mean "left behind by an earlier run". */
export const STALE_HOLDER_CLASSES = classesWith('stale');

/** Classes whose memory is still to come back by itself, in one step. */
export const RELEASING_HOLDER_CLASSES = classesWith('releasing');

/** Classes of a live process that is not going away by itself. */
export const LIVE_HOLDER_CLASSES = classesWith('live');
