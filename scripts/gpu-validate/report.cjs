'use strict';
/**
 * Ends a gpu-validate run: gathers the step records (one JSON file per step, in file-name order)
 * into the JSON report, prints the summary table, and exits 0 when no step failed, 1 otherwise.
 *
 * usage: node report.cjs --steps DIR --meta FILE --out REPORT
 * META is a JSON object the script wrote (mode, host, gpugate command, start time in ms).
 */
const fs = require('node:fs');
const path = require('node:path');
const { parseOptions, readJson } = require('./step-result.cjs');

function main() {
  const o = parseOptions(process.argv.slice(2), ['steps', 'meta', 'out']);
  if (o.steps === undefined || o.meta === undefined || o.out === undefined) {
    process.stderr.write('usage: node report.cjs --steps DIR --meta FILE --out REPORT\n');
    process.exit(64);
  }
  const meta = readJson(o.meta);
  if (meta.error !== undefined) throw new Error(meta.error);
  const steps = fs.readdirSync(o.steps).filter((f) => f.endsWith('.json')).sort().map((f) => {
    const record = readJson(path.join(o.steps, f));
    if (record.error !== undefined) return { step: f.replace(/^\d+-|\.json$/g, ''), status: 'fail', summary: record.error, checks: [], data: {} };
    return record.value;
  });
  const failed = steps.filter((s) => s.status === 'fail');
  const finishedAt = Date.now();
  const identity = steps.find((s) => s.step === 'identity');
  const report = {
    tool: 'gpugate gpu-validate',
    result: failed.length === 0 ? 'pass' : 'fail',
    ...meta.value,
    finishedAt: new Date(finishedAt).toISOString(),
    elapsedMs: typeof meta.value.startedMs === 'number' ? finishedAt - meta.value.startedMs : null,
    driverVersion: identity?.data?.library?.driverVersion ?? null,
    gpus: identity?.data?.gpus ?? [],
    steps,
  };
  fs.mkdirSync(path.dirname(path.resolve(o.out)), { recursive: true });
  fs.writeFileSync(o.out, JSON.stringify(report, null, 2) + '\n');

  const width = Math.max(5, ...steps.map((s) => s.step.length));
  const lines = [
    '',
    `gpu-validate summary (${meta.value.mode} mode${report.driverVersion ? `, driver ${report.driverVersion}` : ''}${report.gpus.length ? `, ${report.gpus.length} GPU(s): ${[...new Set(report.gpus.map((g) => g.name))].join(', ')}` : ''})`,
    `  ${'step'.padEnd(width)}  result  detail`,
    `  ${'-'.repeat(width)}  ------  ------`,
    ...steps.map((s) => `  ${s.step.padEnd(width)}  ${s.status.toUpperCase().padEnd(6)}  ${s.summary}`),
    '',
    `result: ${report.result.toUpperCase()}${failed.length ? ` (${failed.map((s) => s.step).join(', ')} failed)` : ''}; elapsed ${((report.elapsedMs ?? 0) / 1000).toFixed(1)} s`,
    `report: ${path.resolve(o.out)}`,
    '',
  ];
  process.stdout.write(lines.join('\n'));
  process.exit(failed.length === 0 ? 0 : 1);
}

main();
