/**
 * The one wording of why a GPU is not acceptable: which criterion failed, by how much, and who
 * holds it. The CLI's final log line, its `--report-file` and `--json` reason, and the message of
 * GpuWaitTimeoutError all use it.
 */

import { gpuLabel } from './gpu-label';
import { engineViewText } from './engine-view';
import { formatBytes, formatDuration } from '../units';
import { releasingHolders, usedExcludingReserved } from './criteria';
import { describeOwner } from './owner-text';
import type { Holder } from './stale';
import type { GpuEvaluation } from './evaluation';

/** The name to show for a holder: the first word of its command line (engines set it), else comm. */
export function holderName(holder: Pick<Holder, 'cmdline' | 'comm'>): string {
  const first = holder.cmdline?.split(/[\s\0]+/).find((word) => word !== '');
  if (first !== undefined) {
    // A path: keep the file name; a process title like VLLM::Worker_TP6 has no slash.
    const slash = first.lastIndexOf('/');
    return slash === -1 ? first : first.slice(slash + 1) || first;
  }
  return holder.comm ?? '?';
}

/** `pid/name/class`, as progress lines and failure texts list holders. */
export function holderLabel(holder: Pick<Holder, 'pid' | 'class' | 'cmdline' | 'comm'>): string {
  return `${holder.pid}/${holderName(holder)}/${holder.class}`;
}

/** Why one GPU fails, e.g. `GPU 6 (GPU-…): free 3.1GiB < needed 86GiB; held by 4242/VLLM::Worker_TP6/orphan`. */
export function describeGpuFailure(gpu: GpuEvaluation): string {
  const parts: string[] = [];
  const memory = gpu.memory;
  for (const reason of gpu.reasons) {
    if (reason === 'memory' && memory !== null) {
      if (gpu.neededFreeBytes !== null && memory.freeBytes < gpu.neededFreeBytes) {
        parts.push(`free ${formatBytes(memory.freeBytes)} < needed ${formatBytes(gpu.neededFreeBytes)}`);
        if (gpu.engineView !== null) parts.push(engineViewText(gpu.engineView));
      }
      const used = usedExcludingReserved(memory);
      if (gpu.maxUsedBytes !== null && used > gpu.maxUsedBytes) {
        parts.push(`used ${formatBytes(used)}${used === memory.usedBytes ? '' : ' (reserved not counted)'} > allowed ${formatBytes(gpu.maxUsedBytes)}`);
      }
    } else if (reason === 'processes') {
      parts.push(`${gpu.holders.length} process(es) on it`);
    } else if (reason === 'compute-mode') {
      parts.push(
        gpu.computeMode === 'prohibited'
          ? 'compute mode prohibited: no CUDA context can be created'
          : `compute mode ${gpu.computeMode ?? 'unknown'}: one CUDA context at a time, and one is there (or the process list is unreadable)`,
      );
    } else if (reason === 'unstable') {
      const releasing = releasingHolders(gpu.holders).length;
      parts.push(
        releasing > 0
          ? `unstable: ${releasing} holder(s) still releasing memory, which comes back in one step`
          : `unstable: memory still moving (stable for ${formatDuration(gpu.stableForMs)})`,
      );
    } else if (reason === 'error') {
      parts.push(gpu.error === null ? 'memory unreadable' : `${gpu.error.code} from ${gpu.error.fn}`);
    }
  }
  if (gpu.holders.length > 0) parts.push(`held by ${gpu.holders.map(ownedLabel).join(' ')}`);
  else if (gpu.holdersUnknown !== null) parts.push(gpu.holdersUnknown);
  else if (gpu.unattributedBytes !== null && gpu.unattributedBytes > 0 && gpu.reasons.includes('memory')) {
    parts.push(`${formatBytes(gpu.unattributedBytes)} held by no listed process (driver teardown?)`);
  }
  // The UUID alone names it in a reason (the bus id is in the progress lines).
  return `${gpuLabel({ index: gpu.index, uuid: gpu.uuid, pciBusId: null })}: ${parts.join('; ')}`;
}

/** `4242/VLLM::Worker_TP6/orphan (of vllm.service, user vllm, started 3 min ago)`. */
function ownedLabel(holder: Holder): string {
  const owner = describeOwner(holder.owner);
  return owner === null ? holderLabel(holder) : `${holderLabel(holder)} (${owner})`;
}

/** All failing GPUs, joined with ` | `. */
export function describeFailures(gpus: readonly GpuEvaluation[]): string {
  return gpus.filter((gpu) => !gpu.ok).map(describeGpuFailure).join(' | ');
}
