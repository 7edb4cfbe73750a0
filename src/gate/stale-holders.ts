/**
 * Whether a holder was left behind by an earlier run rather than live or draining (its class is
 * stale in holder-classes.ts): what the stale scan reports, `--stale fail` fails on, and the JSON
 * `stale` lists.
 */
import { STALE_HOLDER_CLASSES } from './holder-classes';
import type { Holder } from './stale';

export { STALE_HOLDER_CLASSES };

/** True for a holder of a stale class. */
export function isStaleHolder(holder: Pick<Holder, 'class'>): boolean {
  return STALE_HOLDER_CLASSES.has(holder.class);
}
