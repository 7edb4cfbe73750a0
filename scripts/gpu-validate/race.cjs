'use strict';
/**
 * gpu-validate step "race": the restart race for real. While a holder held memory, `gpugate wait
 * --min-free 0.9 --stable 2s --timeout 120s -v --json` waited; the holder was SIGKILLed; the script
 * polled nvidia-smi until the memory was back. This step judges it: gpugate was still waiting at the
 * kill, exited 0, and only after nvidia-smi last saw the memory held; it saw the holder `active`.
 * It reports the measured release time, when gpugate returned, and the sequence of states gpugate
 * logged for the holder (e.g. active -> gone -> unattributed -> settling -> free).
 *
 * Times are epoch milliseconds taken by the script.
 * usage: node race.cjs --wait-stdout FILE --wait-stderr FILE --wait-rc N --pid N --gpu-index I
 *        --started-ms T --kill-ms T --last-held-ms T --released-ms T|none --exit-ms T --out FILE
 */
const { StepResult, parseOptions, readJson, readText } = require('./step-result.cjs');
const { parseLogLine, holdersInLogLine } = require('./gpugate-json.cjs');

/**
 * The states gpugate's progress lines (`waiting`, `ready`, and `poll` with -v) show for `pid` on
 * GPU `gpu`, consecutive repeats folded: the holder's class while gpugate lists it; once it no
 * longer does, `unattributed` (memory still used by no listed process: driver teardown),
 * `releasing` (memory still above the threshold), `settling` (memory back, not yet stable for
 * --stable); and `free` once gpugate found the GPU ready.
 */
function statesSeen(stderrText, pid, gpu, exitCode) {
  const states = [];
  const push = (state) => {
    if (states[states.length - 1] !== state) states.push(state);
  };
  let parsedLines = 0;
  for (const line of stderrText.split('\n')) {
    const parsed = parseLogLine(line);
    if (parsed === null || Number(parsed.fields.gpu) !== gpu) continue;
    parsedLines += 1;
    const mine = holdersInLogLine(parsed.fields).find((h) => h.pid === pid);
    if (mine !== undefined) push(mine.class);
    else if (parsed.event === 'ready') push('free');
    else if (parsed.fields.why !== undefined && states.length > 0) {
      const why = String(parsed.fields.why).split(',');
      if (parsed.fields.unattributed !== undefined) push('unattributed');
      else if (why.includes('memory')) push('releasing');
      else push('settling');
    }
  }
  if (exitCode === 0) push('free');
  return { states, parsedLines };
}

function seconds(ms) {
  return ms === null ? 'n/a' : `${(ms / 1000).toFixed(2)} s`;
}

function main() {
  const known = ['wait-stdout', 'wait-stderr', 'wait-rc', 'pid', 'gpu-index', 'started-ms', 'kill-ms', 'last-held-ms', 'released-ms', 'exit-ms', 'out'];
  const o = parseOptions(process.argv.slice(2), known);
  for (const required of known) {
    if (o[required] === undefined) {
      process.stderr.write(`race.cjs: --${required} is required\n`);
      process.exit(64);
    }
  }
  const pid = Number(o.pid);
  const rc = Number(o['wait-rc']);
  const killMs = Number(o['kill-ms']);
  const exitMs = Number(o['exit-ms']);
  const lastHeldMs = Number(o['last-held-ms']);
  const releasedMs = o['released-ms'] === 'none' ? null : Number(o['released-ms']);
  const step = new StepResult('race');
  const { states, parsedLines } = statesSeen(readText(o['wait-stderr']), pid, Number(o['gpu-index']), rc);
  step.data = {
    pid,
    gpu: Number(o['gpu-index']),
    exitCode: rc,
    releaseMs: releasedMs === null ? null : releasedMs - killMs,
    lastHeldAfterKillMs: lastHeldMs - killMs,
    gpugateReturnedAfterKillMs: exitMs - killMs,
    waitedBeforeKillMs: killMs - Number(o['started-ms']),
    states,
    progressLines: parsedLines,
  };
  process.stdout.write(`  info states gpugate saw for pid ${pid}: ${states.join(' -> ') || 'none'}\n`);

  step.check('gpugate waited while the holder held memory', exitMs > killMs,
    exitMs > killMs ? `still waiting ${seconds(killMs - Number(o['started-ms']))} after it started` : `gpugate exited ${seconds(killMs - exitMs)} before the kill`);
  step.check('gpugate exit code', rc === 0, `${rc}${rc === 75 ? ' (timed out: memory not free and stable within 120 s)' : ''}`);
  step.check('memory came back (nvidia-smi)', releasedMs !== null,
    releasedMs !== null ? `${seconds(releasedMs - killMs)} after SIGKILL` : 'nvidia-smi still showed it held at the end');
  // Returning early is only wrong for a success: a failure (timeout) may end while memory is held.
  if (rc === 0) {
    step.check('gpugate returned only after the memory was back', exitMs >= lastHeldMs,
      `returned ${seconds(exitMs - killMs)} after SIGKILL; nvidia-smi last saw the memory held ${seconds(lastHeldMs - killMs)} after it`);
  }
  step.check('gpugate saw the holder active', states.includes('active'),
    parsedLines === 0 ? 'no -v progress line could be read' : `states ${states.join(' -> ')}`);

  const final = readJson(o['wait-stdout']);
  if (step.check('gpugate wait --json parses', final.error === undefined, final.error ?? 'one JSON object')) {
    const reported = final.value.exitCode;
    step.data.result = final.value.result ?? null;
    step.check('--json exit code agrees', reported === undefined || reported === rc, `JSON says ${reported}, process exited ${rc}`);
  }
  step.write(o.out, `exit ${rc}; memory back ${seconds(step.data.releaseMs)} after SIGKILL; gpugate returned after ${seconds(step.data.gpugateReturnedAfterKillMs)}; states ${states.join(' -> ')}`);
}

main();
