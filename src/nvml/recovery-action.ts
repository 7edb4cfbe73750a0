/**
 * NVML's GPU recovery action (field value NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, 230; drivers from
 * r570): what the driver says must be done before the GPU is usable again. Xid 154 logs each
 * change. Read once when a session opens; waiting never clears it. The names and the operator's
 * step for each value are written here once; the gate and `doctor` read them from this table.
 */
import type { RecoveryAction } from '../types';

/** Each nvmlDeviceGpuRecoveryAction_t value gpugate names, with what the operator must do. */
export const RECOVERY_ACTIONS: ReadonlyArray<{ value: number; name: RecoveryAction; remedy: string }> = [
  { value: 0, name: 'none', remedy: 'nothing' },
  { value: 1, name: 'gpu-reset', remedy: 'drain the GPU and reset it (nvidia-smi -r -i INDEX)' },
  { value: 2, name: 'node-reboot', remedy: 'reboot the host: a GPU reset is not enough' },
  {
    value: 3,
    name: 'drain-p2p',
    remedy: 'stop all peer-to-peer (NVLink) traffic to the GPU, then read the action again (nvidia-smi -q): it then names the next step',
  },
  { value: 4, name: 'drain-and-reset', remedy: 'the GPU runs at reduced capacity: drain its work, then reset it (nvidia-smi -r -i INDEX)' },
];

/** The name of a raw recovery action value; a value this table does not list is `action-N` (still an action: never "none"). */
export function recoveryActionName(value: number | null): RecoveryAction | null {
  if (value === null) return null;
  return RECOVERY_ACTIONS.find((entry) => entry.value === value)?.name ?? `action-${value}`;
}

/** What the operator must do for `action`, with INDEX filled in. */
export function recoveryRemedy(action: RecoveryAction, index: number): string {
  const remedy = RECOVERY_ACTIONS.find((entry) => entry.name === action)?.remedy ?? 'see the driver documentation for this recovery action and the Xid 154 line in the kernel log';
  return remedy.replaceAll('INDEX', String(index));
}
