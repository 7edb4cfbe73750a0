'use strict';
/**
 * gpu-validate step "open-cost": what running NVML in gpugate's helper process adds to opening
 * NVML on this host, against NVML in the process itself (docs/benchmarks.md's goal: at most 5 ms
 * added to `gpugate check`). Each measure runs in child processes (open-probe.cjs), so an
 * in-process open stuck in the driver can cost this step a probe, never the run:
 *
 *   first open     PAIRS pairs of fresh processes, one per mode, in alternating order, each timing
 *                  its one openNvml() right after loading the package: what one `gpugate check` pays.
 *                  The added cost is the median of the pairs' differences.
 *   repeated open  one process opening and closing REPEATS times per mode, alternating (the
 *                  library stays mapped there): what a long-running program pays per open.
 *
 * The figures are reported next to the goal, not judged (a host's process start-up sets most of
 * them); the step fails when a probe fails or does not finish, and skips for a gpugate without the
 * helper process.
 *
 * usage: node open-cost.cjs --package DIR --node PATH --budget-s S --out FILE
 */
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { StepResult, parseOptions } = require('./step-result.cjs');

const PAIRS = 10;
const REPEATS = 10;
const GOAL_MS = 5;
/** One probe's bound: an open that takes longer is a driver that hangs, whatever the budget left. */
const PROBE_LIMIT_MS = 30_000;
/** How long a killed probe gets to be reaped before it is reported as left behind (a kill waits on a call in the kernel). */
const KILL_GRACE_MS = 2_000;

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function ms(value) {
  return `${value.toFixed(2)} ms`;
}

/** What a process that did not end is doing: "a thread in state D" when one is (its leader may show Z), else its state. */
function stateOf(pid) {
  const states = [];
  try {
    for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
      try {
        const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        states.push(stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3));
      } catch {
        // the thread ended meanwhile
      }
    }
  } catch {
    return 'gone';
  }
  if (states.includes('D')) return 'a thread in state D';
  return `state ${states.join('') || 'unknown'}`;
}

/**
 * Runs one probe; resolves to its JSON line, or to { failed } saying why. A probe past its limit
 * is killed and, if it does not end (a call stuck in the kernel), left behind and named.
 */
function probe(node, pkg, args, limitMs) {
  return new Promise((resolve) => {
    const child = spawn(node, [path.join(__dirname, 'open-probe.cjs'), pkg, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      const what = `open-probe ${args.join(' ')} (pid ${child.pid}) did not finish within ${Math.round(limitMs)} ms`;
      child.kill('SIGKILL');
      const left = setTimeout(() => {
        child.unref();
        child.stdout.destroy();
        child.stderr.destroy();
        resolve({ failed: `${what}; it did not end after SIGKILL (${stateOf(child.pid)}): an NVML call is stuck in the kernel` });
      }, KILL_GRACE_MS);
      child.once('exit', () => {
        clearTimeout(left);
        resolve({ failed: `${what} and was killed` });
      });
    }, limitMs);
    // 'close': the process has ended and its output is all read.
    child.once('close', (code, signal) => {
      if (timedOut) return;
      clearTimeout(timer);
      const line = stdout.trim().split('\n').pop() ?? '';
      try {
        resolve(JSON.parse(line));
      } catch {
        resolve({ failed: `open-probe ${args.join(' ')} ended (${signal ?? `exit ${code}`}) without its JSON line: ${stderr.trim().split('\n').slice(-2).join(' | ') || line}` });
      }
    });
  });
}

async function main() {
  const known = ['package', 'node', 'budget-s', 'out'];
  const o = parseOptions(process.argv.slice(2), known);
  for (const required of known) {
    if (o[required] === undefined) {
      process.stderr.write(`open-cost.cjs: --${required} is required\n`);
      process.exit(64);
    }
  }
  const step = new StepResult('open-cost');
  const deadline = performance.now() + Number(o['budget-s']) * 1000;
  const limit = () => Math.min(PROBE_LIMIT_MS, Math.max(1_000, deadline - performance.now()));
  const run = (args) => probe(o.node, o.package, args, limit());

  const pairs = [];
  let failure = null;
  for (let i = 0; i < PAIRS && failure === null && performance.now() < deadline; i++) {
    const order = i % 2 === 0 ? ['in-process', 'helper'] : ['helper', 'in-process'];
    const pair = {};
    for (const mode of order) {
      const result = await run(['first', mode]);
      if (result.failed !== undefined || result.error !== undefined) {
        failure = { mode, result };
        break;
      }
      pair[mode] = result;
    }
    if (failure === null) pairs.push(pair);
  }
  if (failure?.result.code === 'GPUGATE_CONFIG' && /nvmlProcess/.test(failure.result.error)) {
    step.skip(`this gpugate has no helper process to compare (${failure.result.error})`);
    return step.write(o.out, '');
  }
  const counted = pairs.length > 0 && pairs[0].helper.helpers !== null && pairs[0]['in-process'].helpers !== null;
  if (counted && (pairs[0].helper.helpers === 0 || pairs[0]['in-process'].helpers !== 0)) {
    step.skip(`this gpugate's nvmlProcess option does not choose a helper process (gpugate-nvml-helper children while open: ${pairs[0].helper.helpers} in the helper mode, ${pairs[0]['in-process'].helpers} in-process)`);
    return step.write(o.out, '');
  }
  const failedText = failure === null ? null : failure.result.failed ?? `openNvml({ nvmlProcess: '${failure.mode}' }) failed: ${failure.result.error}`;
  if (!step.check('every probe opened NVML', failure === null, failedText ?? `${pairs.length * 2} fresh processes`)) return step.write(o.out, '');
  if (!step.check('first opens measured', pairs.length >= 3, `${pairs.length} pair(s) within the ${o['budget-s']} s budget`)) return step.write(o.out, '');
  if (!counted) step.note('the kernel does not list a process\'s children here: that the helper mode ran a helper was not checked');

  const firstOpen = {
    pairs: pairs.length,
    helperMedianMs: median(pairs.map((p) => p.helper.openMs)),
    inProcessMedianMs: median(pairs.map((p) => p['in-process'].openMs)),
    addedMedianMs: median(pairs.map((p) => p.helper.openMs - p['in-process'].openMs)),
  };
  step.data = { ...step.data, goalMs: GOAL_MS, firstOpen, repeatedOpen: null };
  let repeatedText = 'repeated opens not measured (budget spent)';
  if (performance.now() < deadline) {
    const repeated = await run(['repeated', String(REPEATS)]);
    const failed = repeated.failed ?? (repeated.error === undefined ? null : `repeated opens failed: ${repeated.error}`);
    if (!step.check('repeated opens measured', failed === null, failed ?? `${REPEATS} per mode in one process`)) return step.write(o.out, '');
    const helperMedianMs = median(repeated.helperMs);
    const inProcessMedianMs = median(repeated.inProcessMs);
    step.data.repeatedOpen = { opens: REPEATS, helperMedianMs, inProcessMedianMs, addedMs: helperMedianMs - inProcessMedianMs };
    repeatedText = `repeated opens: ${ms(helperMedianMs)} helper, ${ms(inProcessMedianMs)} in-process, ${ms(helperMedianMs - inProcessMedianMs)} added`;
  }
  const summary = `the helper adds ${ms(firstOpen.addedMedianMs)} to a first open (goal <= ${GOAL_MS} ms; medians of ${pairs.length} pairs: ` +
    `${ms(firstOpen.helperMedianMs)} helper, ${ms(firstOpen.inProcessMedianMs)} in-process); ${repeatedText}`;
  process.stdout.write(`  info ${summary}\n`);
  step.write(o.out, summary);
}

main();
