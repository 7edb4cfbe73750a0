/**
 * Which N of the acceptable GPUs to hand out together: the set that sits closest on the PCI tree
 * (behind one PCIe switch, then one host bridge, then one NUMA node), so peer traffic and host
 * copies stay local. Where nothing is known of the topology every pair is equally far and the
 * choice is plain NVML order.
 */
import type { PciPlacement } from '../host/pci-topology';

/** How far apart two GPUs are, from their placements. */
export type Nearness = 'switch' | 'host-bridge' | 'numa-node' | 'far';

const NEARNESS_COST: Readonly<Record<Nearness, number>> = { switch: 10, 'host-bridge': 20, 'numa-node': 30, far: 40 };

/** A GPU to place: its NVML index (the tie-breaker) and where it sits (null: unknown). */
export interface PlacementCandidate {
  index: number;
  placement: PciPlacement | null;
}

function sharedBridges(a: PciPlacement, b: PciPlacement): number {
  let shared = 0;
  while (shared < a.upstream.length && shared < b.upstream.length && a.upstream[shared] === b.upstream[shared]) shared += 1;
  return shared;
}

/** The closest level two GPUs share. */
export function nearness(a: PciPlacement | null, b: PciPlacement | null): Nearness {
  if (a === null || b === null) return 'far';
  if (a.hostBridge !== null && a.hostBridge === b.hostBridge) return sharedBridges(a, b) > 0 ? 'switch' : 'host-bridge';
  if (a.numaNode !== null && a.numaNode === b.numaNode) return 'numa-node';
  return 'far';
}

/** Cost of a pair (whole numbers, so sums compare exactly): lower is nearer; behind one switch, deeper shared bridges are nearer still. */
function pairCost(a: PlacementCandidate, b: PlacementCandidate): number {
  const level = nearness(a.placement, b.placement);
  const depth = level === 'switch' && a.placement !== null && b.placement !== null ? Math.min(sharedBridges(a.placement, b.placement), 9) : 0;
  return NEARNESS_COST[level] - depth;
}

/**
 * Picks `count` of `candidates` (given in preference order, NVML order normally): from each
 * candidate in turn, grow a set by adding the nearest remaining one (ties to the earlier), and
 * keep the set whose summed pairwise cost is lowest (ties to the earlier start). Returns the
 * chosen ones in NVML index order; all of them when there are no more than `count`.
 */
export function chooseNearest<T extends PlacementCandidate>(candidates: readonly T[], count: number): T[] {
  if (count <= 0) return [];
  if (candidates.length <= count) return [...candidates].sort((a, b) => a.index - b.index);
  let best: { set: T[]; cost: number } | null = null;
  for (const seed of candidates) {
    const set = [seed];
    let cost = 0;
    const rest = candidates.filter((c) => c !== seed);
    while (set.length < count) {
      let pick = 0;
      let pickCost = Number.POSITIVE_INFINITY;
      rest.forEach((candidate, at) => {
        const added = set.reduce((sum, member) => sum + pairCost(member, candidate), 0);
        if (added < pickCost) {
          pick = at;
          pickCost = added;
        }
      });
      set.push(rest.splice(pick, 1)[0]!);
      cost += pickCost;
    }
    if (best === null || cost < best.cost) best = { set, cost };
  }
  return best!.set.sort((a, b) => a.index - b.index);
}
