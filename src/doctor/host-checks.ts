/**
 * The host checks of `gpugate doctor`: the driver's device nodes present and usable, whether
 * gpugate runs in a container and in the host's PID namespace (NVML reports host pids: holders
 * can only be attributed from there), CUDA_VISIBLE_DEVICES ordinals against CUDA_DEVICE_ORDER,
 * and nvidia-persistenced running. The namespace facts come from the holder inspection's own
 * reading of /proc (prepareInspectContext), so doctor and `holders` agree.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { prepareInspectContext } from '../gate/stale';
import { listPids, readProcText } from '../host/procfs';
import { looksLikeContainer } from '../nvml/nvml-error';
import type { GpuDevice } from '../types';
import type { DoctorCheck } from './doctor-check';

/** What the host checks need from the caller. */
export interface HostFacts {
  /** Where the device nodes are (default /dev). */
  devDir: string;
  /** Default /proc. */
  procRoot: string;
  env: NodeJS.ProcessEnv;
  /** The GPUs NVML lists (empty when it could not be opened). */
  devices: readonly GpuDevice[];
}

const SUBJECT = 'host';
/** The kernel keeps 15 characters of a command name. */
const PERSISTENCED_COMM = 'nvidia-persistenced'.slice(0, 15);

function accessOf(file: string): 'ok' | 'missing' | 'no-access' {
  try {
    fs.accessSync(file, fs.constants.R_OK | fs.constants.W_OK);
    return 'ok';
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : 'no-access';
  }
}

function deviceNodesCheck(facts: HostFacts): DoctorCheck {
  const required = ['nvidiactl', ...facts.devices.filter((d) => d.minorNumber !== null).map((d) => `nvidia${d.minorNumber as number}`)];
  const states = Object.fromEntries(required.map((name) => [path.join(facts.devDir, name), accessOf(path.join(facts.devDir, name))]));
  const uvm = path.join(facts.devDir, 'nvidia-uvm');
  const uvmState = accessOf(uvm);
  const evidence = { nodes: { ...states, [uvm]: uvmState } };
  const missing = Object.entries(states).filter(([, state]) => state === 'missing').map(([file]) => file);
  const denied = Object.entries(states).filter(([, state]) => state === 'no-access').map(([file]) => file);
  if (missing.length > 0) {
    return { id: 'host.device-nodes', subject: SUBJECT, status: 'fail', summary: `missing device node(s): ${missing.join(', ')}`, evidence,
      advice: 'on the host: load the driver (modprobe nvidia; nvidia-modprobe creates the nodes); in a container: pass the GPUs in (--gpus all, the Kubernetes device plugin)' };
  }
  if (denied.length > 0) {
    return { id: 'host.device-nodes', subject: SUBJECT, status: 'fail', summary: `no read/write access to ${denied.join(', ')}`, evidence,
      advice: 'run as a user in the group that owns the nodes (often video or render), or fix the device cgroup of the container' };
  }
  if (uvmState !== 'ok') {
    return { id: 'host.device-nodes', subject: SUBJECT, status: 'warn', summary: `${uvm} is ${uvmState === 'missing' ? 'missing' : 'not accessible'}: CUDA needs it`, evidence,
      advice: 'modprobe nvidia-uvm (or nvidia-modprobe -u -c=0) on the host; in a container, pass it in with the GPUs' };
  }
  return { id: 'host.device-nodes', subject: SUBJECT, status: 'pass', summary: `${required.length + 1} device nodes present and usable`, evidence };
}

function containerCheck(): DoctorCheck {
  const inContainer = looksLikeContainer();
  return { id: 'host.container', subject: SUBJECT, status: 'pass', summary: inContainer ? 'running in a container' : 'not in a container', evidence: { container: inContainer } };
}

async function pidNamespaceCheck(facts: HostFacts): Promise<DoctorCheck> {
  const context = await prepareInspectContext({ procRoot: facts.procRoot, devRoot: facts.devDir });
  const evidence = { nested: context.nestedPidNamespace, hidepid: context.hidepid };
  if (context.nestedPidNamespace) {
    return { id: 'host.pid-namespace', subject: SUBJECT, status: 'warn', summary: `${context.nestedReason}: holders cannot be attributed`, evidence: { ...evidence, reason: context.nestedReason },
      advice: 'run gpugate in the host PID namespace (docker --pid=host, Kubernetes hostPID: true) so stale holders can be classified and cleaned' };
  }
  if (context.hidepid !== null) {
    return { id: 'host.pid-namespace', subject: SUBJECT, status: 'warn', summary: `/proc is mounted with ${context.hidepid}: other users' holders are invisible`, evidence,
      advice: 'run gpugate as root, or as a member of the procfs gid= group' };
  }
  return { id: 'host.pid-namespace', subject: SUBJECT, status: 'pass', summary: 'in the host PID namespace: NVML\'s pids can be looked up', evidence };
}

function cudaOrderCheck(facts: HostFacts): DoctorCheck {
  const visible = facts.env['CUDA_VISIBLE_DEVICES'];
  const order = facts.env['CUDA_DEVICE_ORDER'];
  const models = [...new Set(facts.devices.map((d) => `${d.name} (${d.computeCapability ?? '?'})`))];
  const evidence = { CUDA_VISIBLE_DEVICES: visible ?? null, CUDA_DEVICE_ORDER: order ?? null, models };
  const ordinals = visible === undefined ? [] : visible.split(',').map((s) => s.trim()).filter((s) => /^\d+$/.test(s));
  if (ordinals.length === 0 || order === 'PCI_BUS_ID') {
    const why = visible === undefined ? 'CUDA_VISIBLE_DEVICES is not set' : ordinals.length === 0 ? 'CUDA_VISIBLE_DEVICES names no ordinal' : 'CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA ordinals are NVML indices';
    return { id: 'host.cuda-device-order', subject: SUBJECT, status: 'pass', summary: why, evidence };
  }
  if (models.length <= 1) {
    return { id: 'host.cuda-device-order', subject: SUBJECT, status: 'pass',
      summary: `CUDA_VISIBLE_DEVICES=${visible ?? ''} without CUDA_DEVICE_ORDER=PCI_BUS_ID, but every GPU is the same model, so CUDA's fastest-first order is the PCI order`, evidence };
  }
  return { id: 'host.cuda-device-order', subject: SUBJECT, status: 'warn',
    summary: `CUDA_VISIBLE_DEVICES=${visible ?? ''} counts in CUDA's fastest-first order (CUDA_DEVICE_ORDER is ${order ?? 'unset'}), which differs from NVML's PCI order on this mixed host`,
    evidence, advice: 'set CUDA_DEVICE_ORDER=PCI_BUS_ID (so the ordinals mean what nvidia-smi and gpugate show), or select GPUs by UUID' };
}

async function persistencedPids(procRoot: string): Promise<number[]> {
  const found: number[] = [];
  for (const pid of await listPids(procRoot).catch(() => [] as number[])) {
    const comm = await readProcText(path.join(procRoot, String(pid), 'comm'));
    if (comm.kind !== 'ok' || comm.text.trim() !== PERSISTENCED_COMM) continue;
    // The name is cut at 15 characters: confirm with the command line's first word.
    const cmdline = await readProcText(path.join(procRoot, String(pid), 'cmdline'));
    const argv0 = cmdline.kind === 'ok' ? cmdline.text.split('\0')[0] ?? '' : '';
    if (path.basename(argv0) === 'nvidia-persistenced') found.push(pid);
  }
  return found;
}

async function persistencedCheck(facts: HostFacts, nested: boolean): Promise<DoctorCheck> {
  const pids = await persistencedPids(facts.procRoot);
  const evidence = { pids };
  if (pids.length > 0) return { id: 'host.persistenced', subject: SUBJECT, status: 'pass', summary: `nvidia-persistenced is running (pid ${pids.join(', ')})`, evidence };
  if (nested) {
    return { id: 'host.persistenced', subject: SUBJECT, status: 'pass', summary: 'nvidia-persistenced cannot be seen from a nested PID namespace (persistence mode is checked per GPU)', evidence };
  }
  const allOn = facts.devices.length > 0 && facts.devices.every((d) => d.persistenceMode === true);
  return { id: 'host.persistenced', subject: SUBJECT, status: 'warn',
    summary: allOn ? 'nvidia-persistenced is not running (persistence mode is on, set the deprecated way: nvidia-smi -pm 1)' : 'nvidia-persistenced is not running',
    evidence, advice: 'systemctl enable --now nvidia-persistenced: it keeps every GPU initialised between users, and survives what nvidia-smi -pm 1 does not' };
}

/** The host checks. */
export async function hostChecks(facts: HostFacts): Promise<DoctorCheck[]> {
  const namespace = await pidNamespaceCheck(facts);
  return [deviceNodesCheck(facts), containerCheck(), namespace, cudaOrderCheck(facts), await persistencedCheck(facts, namespace.evidence['nested'] === true)];
}
