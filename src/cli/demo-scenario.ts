/**
 * The simulator scenario `gpugate demo` replays: an 8× RTX PRO 6000 host right after a vLLM
 * crash. Every GPU still holds ~92 GiB of the previous attempt; the workers of seven GPUs are
 * already gone (the driver is releasing their memory), the eighth (GPU 6) is held by a real,
 * live, orphaned worker process (a "spawn" holder the simulated host starts). The timeline
 * drops that worker at {@link DEMO_WORKER_EXIT_MS}, which ends its process; its memory then
 * drains in steps, as a large pinned pool does on a real host. The timeline is a real host's
 * order of events compressed to a few seconds: a newcomer's first run waits about 6 s.
 */

const GiB = 1024 ** 3;
/** RTX PRO 6000 Blackwell Server Edition as NVML reports it. */
const TOTAL_BYTES = 102_641_106_944;
const RESERVED_BYTES = 503_316_480;
/** What the crashed attempt held per GPU (vLLM at --gpu-memory-utilization 0.9 plus CUDA context). */
const HELD_BYTES = 92 * GiB;
/** A CUDA context-sized remainder that the next start tolerates. */
const IDLE_BYTES = 0.4 * GiB;
const BUS_IDS = ['18', '2A', '3A', '5D', '84', '8A', '9B', 'DB'];

/** The GPU whose holder is the live orphaned worker. */
export const DEMO_WORKER_GPU = 6;
/** When (ms after the host started) the orphaned worker exits. */
export const DEMO_WORKER_EXIT_MS = 2500;
/** The worker's process title, as vLLM sets it. */
export const DEMO_WORKER_TITLE = `VLLM::Worker_TP${DEMO_WORKER_GPU}`;

/** Build the scenario object (see docs/scenarios.md); `gonePids` are pids no process has. */
export function demoScenario(gonePids: readonly number[]): object {
  const devices = BUS_IDS.map((bus, index) => {
    const holder = index === DEMO_WORKER_GPU ? { spawn: { comm: DEMO_WORKER_TITLE } } : { pid: gonePids[index] ?? 0 };
    return {
      name: 'NVIDIA RTX PRO 6000 Blackwell Server Edition',
      uuid: `GPU-6f0d3c1e-94a2-4b7e-8c21-5d0e7a9b3c${index.toString(16).padStart(2, '0')}`,
      pciBusId: `00000000:${bus}:00.0`,
      minorNumber: index,
      computeCapability: [12, 0],
      memory: { totalBytes: TOTAL_BYTES, reservedBytes: RESERVED_BYTES, usedBytes: HELD_BYTES },
      persistenceMode: true,
      computeMode: 'default',
      migMode: false,
      utilization: { gpu: 0, memory: 0 },
      temperatureC: 38 + index,
      powerWatts: 88.5,
      processes: [{ ...holder, usedBytes: Math.round(HELD_BYTES - 0.6 * GiB), kinds: ['compute'], name: `VLLM::Worker_TP${index}` }],
    };
  });
  const timeline: object[] = [];
  const drain = (device: number, startMs: number, stepMs: number): void => {
    const steps = [0.7, 0.35, 0.08];
    timeline.push({ atMs: startMs, device, set: { processes: [] } });
    steps.forEach((share, i) => {
      timeline.push({ atMs: startMs + (i + 1) * stepMs, device, set: { memory: { usedBytes: Math.round(HELD_BYTES * share) } } });
    });
    timeline.push({ atMs: startMs + (steps.length + 1) * stepMs, device, set: { memory: { usedBytes: Math.round(IDLE_BYTES) } } });
  };
  // The gone workers' memory comes back first, staggered as the driver tears contexts down.
  for (let device = 0; device < BUS_IDS.length; device += 1) {
    if (device !== DEMO_WORKER_GPU) drain(device, 800 + device * 100, 300);
  }
  // The orphan's memory only starts to drain once it has exited.
  drain(DEMO_WORKER_GPU, DEMO_WORKER_EXIT_MS, 400);
  timeline.sort((a, b) => (a as { atMs: number }).atMs - (b as { atMs: number }).atMs);
  return {
    system: { driverVersion: '580.95.05', nvmlVersion: '13.580.95.05', cudaDriverVersion: 13000 },
    devices,
    timeline,
  };
}
