'use strict';
/**
 * gpu-validate step "latency": reads `gpugate bench --json` (run by the script with the nvidia-smi
 * in use first on PATH) and reports gpugate's poll latency against nvidia-smi's on this host.
 * The step fails only when the benchmark itself fails; the figures are reported, not judged
 * (performance.md's real-host goal, >= 50x faster than one warm nvidia-smi query, is shown next
 * to the measured ratio).
 *
 * With `--format text` (a gpugate whose bench has no --json) the step reports bench's own
 * table lines for the snapshot, nvidia-smi and the ratio, as printed.
 *
 * usage: node latency.cjs --bench FILE --format json|text --bench-rc N --bench-stderr FILE --out FILE
 */
const { StepResult, parseOptions, readJson, readText } = require('./step-result.cjs');
const { benchFigures } = require('./gpugate-json.cjs');

function ms(value) {
  if (value === null || value === undefined) return 'n/a';
  return value < 1 ? `${(value * 1000).toFixed(1)} µs` : `${value.toFixed(2)} ms`;
}

function main() {
  const known = ['bench', 'format', 'bench-rc', 'bench-stderr', 'out'];
  const o = parseOptions(process.argv.slice(2), known);
  for (const required of known) {
    if (o[required] === undefined) {
      process.stderr.write(`latency.cjs: --${required} is required\n`);
      process.exit(64);
    }
  }
  const step = new StepResult('latency');
  const rc = Number(o['bench-rc']);
  const stderrTail = readText(o['bench-stderr']).trim().split('\n').slice(-3).join(' | ');
  if (!step.check('gpugate bench runs', rc === 0, rc === 0 ? 'exit 0' : `exit ${rc}${rc === 124 ? ' (timed out)' : ''}: ${stderrTail}`)) {
    return step.write(o.out, '');
  }
  if (o.format === 'text') {
    const lines = readText(o.bench).split('\n').map((l) => l.trim().replace(/\s{2,}/g, '  '));
    const picked = lines.filter((l) => /^(gpugate snapshot, memory only|nvidia-smi|ratio:)/.test(l));
    step.data = { text: picked };
    step.check('gpugate bench reports a poll latency', picked.some((l) => l.startsWith('gpugate snapshot')), picked.join(' | ') || 'no snapshot line in its output');
    return step.write(o.out, picked.join(' | '));
  }
  const doc = readJson(o.bench);
  if (!step.check('gpugate bench --json parses', doc.error === undefined, doc.error ?? 'one JSON object')) return step.write(o.out, '');
  let figures;
  try {
    figures = benchFigures(doc.value);
  } catch (err) {
    step.check('gpugate bench reports a poll latency', false, err.message);
    return step.write(o.out, '');
  }
  step.data = figures;
  step.check('gpugate poll latency measured', typeof figures.gpugateMedianMs === 'number',
    `memory-only snapshot of ${figures.devices ?? '?'} GPU(s): median ${ms(figures.gpugateMedianMs)}, p99 ${ms(figures.gpugateP99Ms)}; with process lists: median ${ms(figures.gpugateWithProcessesMedianMs)}`);
  let versus = 'nvidia-smi not measured';
  if (typeof figures.nvidiaSmiMedianMs === 'number' && typeof figures.gpugateMedianMs === 'number' && figures.gpugateMedianMs > 0) {
    figures.ratio = figures.nvidiaSmiMedianMs / figures.gpugateMedianMs;
    versus = `nvidia-smi median ${ms(figures.nvidiaSmiMedianMs)}: gpugate ${figures.ratio.toFixed(0)}x faster (real-host goal >= 50x)`;
  } else if (figures.nvidiaSmiSkipped) {
    versus = `nvidia-smi not measured: ${figures.nvidiaSmiSkipped}`;
  }
  process.stdout.write(`  info ${versus}\n`);
  step.write(o.out, `gpugate median ${ms(figures.gpugateMedianMs)} (p99 ${ms(figures.gpugateP99Ms)}); ${versus}`);
}

main();
