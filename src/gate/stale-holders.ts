/**
 * Which holder classes mean "left behind by an earlier run" rather than a live or draining
 * holder: what the stale scan reports, `--stale fail` fails on, and the JSON `stale` lists.
 */
import type { Holder, HolderClass } from './stale';

/** Holder classes that mean "left behind by an earlier run". */
export const STALE_HOLDER_CLASSES: ReadonlySet<HolderClass> = new Set<HolderClass>(['leftover', 'orphan', 'zombie', 'zombie_live_threads']);

/** True for a holder of a stale class. */
export function isStaleHolder(holder: Pick<Holder, 'class'>): boolean {
  return STALE_HOLDER_CLASSES.has(holder.class);
}
