'use strict';
/**
 * gpu-validate step "processes": with a real CUDA context holding a known amount of memory,
 * `gpugate holders --json` must list the holder's pid on its GPU, classified `active`, with the
 * memory nvidia-smi reports for that pid (within a few MiB: nvidia-smi prints whole MiB) and at
 * least the amount the holder allocated (the CUDA context itself adds to it).
 *
 * usage: node processes.cjs --holders FILE --smi-apps FILE --pid N --gpu-index I --gpu-uuid U
 *        --hold-bytes N --tolerance-mib N --out FILE
 */
const { StepResult, parseOptions, readJson, readText, mib, MIB } = require('./step-result.cjs');
const { parseNvidiaSmiCsv } = require('./nvidia-smi-csv.cjs');
const { holdersOf } = require('./gpugate-json.cjs');

function main() {
  const known = ['holders', 'smi-apps', 'pid', 'gpu-index', 'gpu-uuid', 'hold-bytes', 'tolerance-mib', 'out'];
  const o = parseOptions(process.argv.slice(2), known);
  for (const required of known) {
    if (o[required] === undefined) {
      process.stderr.write(`processes.cjs: --${required} is required\n`);
      process.exit(64);
    }
  }
  const pid = Number(o.pid);
  const gpu = Number(o['gpu-index']);
  const holdBytes = Number(o['hold-bytes']);
  const toleranceBytes = Number(o['tolerance-mib']) * MIB;
  const step = new StepResult('processes');
  step.data = { pid, gpu, holdBytes };
  const write = (summary) => step.write(o.out, summary);

  const report = readJson(o.holders);
  if (!step.check('gpugate holders --json parses', report.error === undefined, report.error ?? 'one JSON object')) return write('');
  let holders;
  try {
    holders = holdersOf(report.value);
  } catch (err) {
    step.check('gpugate holders --json lists holders', false, err.message);
    return write('');
  }
  const holder = holders.find((h) => h.pid === pid);
  const listed = holder !== undefined && (!Array.isArray(holder.gpus) || holder.gpus.includes(gpu));
  const seen = holders.map((h) => `${h.pid}/${h.class}/gpus=${(h.gpus ?? []).join('+')}`).join(', ') || 'none';
  if (!step.check('gpugate lists the holder', listed, `pid ${pid} on GPU ${gpu}; gpugate lists ${seen}`)) return write('');
  step.data.gpugate = { class: holder.class, usedBytes: holder.usedBytes ?? null, comm: holder.comm ?? null, reason: holder.reason ?? null };
  // Inside a systemd service every other process of that service is a leftover by design.
  const hint = holder.class === 'leftover' ? ': gpu-validate runs inside a systemd service, so gpugate counts its holder as a leftover of that service; run it from a login shell' : '';
  step.check('classified active', holder.class === 'active', `class ${holder.class}${holder.reason ? ` (${holder.reason})` : ''}${hint}`);

  const used = typeof holder.usedBytes === 'number' ? holder.usedBytes : null;
  step.check('holds at least what it allocated', used !== null && used + toleranceBytes >= holdBytes,
    `gpugate ${mib(used)}, allocated ${mib(holdBytes)}`);

  let apps = [];
  try {
    apps = parseNvidiaSmiCsv(readText(o['smi-apps']));
  } catch (err) {
    step.check('nvidia-smi --query-compute-apps parses', false, err.message);
    return write('');
  }
  const app = apps.find((a) => Number(a.pid) === pid && (a.gpu_uuid === undefined || a.gpu_uuid === o['gpu-uuid']));
  if (step.check('nvidia-smi lists the holder', app !== undefined, `pid ${pid} on ${o['gpu-uuid']}`)) {
    const smiUsed = app.used_gpu_memory ?? null;
    step.data.nvidiaSmiUsedBytes = smiUsed;
    step.check('memory matches nvidia-smi', used !== null && smiUsed !== null && Math.abs(used - smiUsed) <= toleranceBytes,
      `gpugate ${mib(used)}, nvidia-smi ${mib(smiUsed)} (tolerance ${mib(toleranceBytes)})`);
  }
  write(`pid ${pid} listed on GPU ${gpu} with ${mib(used)} (nvidia-smi ${mib(step.data.nvidiaSmiUsedBytes)}, allocated ${mib(holdBytes)}), class ${holder.class}`);
}

main();
