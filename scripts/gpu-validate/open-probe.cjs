'use strict';
/**
 * gpu-validate step "open-cost", one measuring process (started by open-cost.cjs): loads the
 * gpugate package through its public API, as a program does, and times opening NVML.
 *
 *   first MODE    one openNvml({ nvmlProcess: MODE }) in this fresh process, the package just
 *                 loaded: what one `gpugate check` pays to open NVML
 *   repeated N    after one open of each mode, N openNvml() + close() per mode, alternating: what a
 *                 long-running program pays per open (the library already mapped in this process)
 *
 * Prints one JSON line: { openMs, helpers } for first (helpers: this process's gpugate-nvml-helper
 * children while the session was open, 1 in the helper mode and 0 in-process when the mode was
 * honoured; null when they cannot be listed), { helperMs: [...], inProcessMs: [...] } for repeated, or { error, code } when opening
 * failed (exit 0 either way: the step decides).
 *
 * usage: node open-probe.cjs PACKAGE first helper|in-process
 *        node open-probe.cjs PACKAGE repeated N
 */

const fs = require('node:fs');
const path = require('node:path');

/**
 * This process's children that run gpugate-nvml-helper: the proof that a mode used (or did not use)
 * the helper; null where the kernel does not list children (no /proc/PID/task/TID/children).
 */
function helperChildren() {
  let pids;
  try {
    pids = fs.readdirSync('/proc/self/task').flatMap((tid) => fs.readFileSync(`/proc/self/task/${tid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean));
  } catch {
    return null;
  }
  return pids.filter((pid) => {
    try {
      return path.basename(fs.readlinkSync(`/proc/${pid}/exe`)) === 'gpugate-nvml-helper';
    } catch {
      return false;
    }
  }).length;
}

async function timedOpen(openNvml, nvmlProcess) {
  const start = performance.now();
  const session = await openNvml({ nvmlProcess });
  const openMs = performance.now() - start;
  const helpers = helperChildren();
  await session.close();
  return { openMs, helpers };
}

async function main() {
  const [pkg, kind, arg] = process.argv.slice(2);
  const { openNvml } = require(pkg);
  if (kind === 'first') return timedOpen(openNvml, arg);
  const count = Number(arg);
  const helperMs = [];
  const inProcessMs = [];
  await timedOpen(openNvml, 'helper');
  await timedOpen(openNvml, 'in-process');
  for (let i = 0; i < count; i++) {
    helperMs.push((await timedOpen(openNvml, 'helper')).openMs);
    inProcessMs.push((await timedOpen(openNvml, 'in-process')).openMs);
  }
  return { helperMs, inProcessMs };
}

main().then(
  (result) => process.stdout.write(`${JSON.stringify(result)}\n`),
  (error) => process.stdout.write(`${JSON.stringify({ error: error instanceof Error ? error.message : String(error), code: error?.code ?? null })}\n`),
);
