'use strict';
/**
 * gpu-validate step "doctor": reads `gpugate doctor --json` from this host. What doctor finds is
 * recorded, not judged: exit 0 (all passed), 75 (warnings) and 69 (a failed check) are all
 * results. Judged is that doctor works here: the document is well-formed (its schema, the exit
 * code it states, a result that is its worst check), it covers every GPU (as many as
 * `gpugate status --json` lists), and every GPU's health checks rest either on a reading of the
 * native health query or on an NVML error code (a GPU that does not answer NVML says why), never
 * on nothing.
 *
 * usage: node doctor.cjs --doctor FILE --doctor-rc N --doctor-stderr FILE --schemas DIR --out FILE [--status FILE]
 */
const { StepResult, parseOptions, readJson } = require('./step-result.cjs');
const { DOCTOR_HEALTH_READINGS, doctorGpus, statusDevices } = require('./gpugate-json.cjs');
const { judgeCommandDocument } = require('./command-document.cjs');

/** Exit codes that are doctor's findings: every check passed, warnings only, a failed check. */
const DOCTOR_RESULT_CODES = [0, 75, 69];
const NVML_CODE = /^NVML_ERROR_[A-Z_]+$/;
const STATUS_RANK = { pass: 0, warn: 1, fail: 2 };

/** How one health check of a GPU rests: on a reading, on an NVML code, or on nothing usable. */
function healthBasis(check, fields) {
  if (check === undefined) return { kind: 'missing', detail: 'no such check' };
  const evidence = check.evidence ?? {};
  if (typeof evidence.code === 'string') {
    return NVML_CODE.test(evidence.code) ? { kind: 'code', code: evidence.code } : { kind: 'bad', detail: `code ${evidence.code} is not an NVML error code` };
  }
  const absent = fields.filter((f) => !Object.hasOwn(evidence, f));
  if (absent.length === 0) return { kind: 'read' };
  return { kind: 'bad', detail: `neither a reading (${absent.join(', ')} missing) nor an NVML code: ${check.summary}` };
}

/** Checks that GPU `gpu`'s health was read or NVML said why not; returns its record for the report. */
function judgeGpu(step, gpu) {
  const name = `GPU ${gpu.index} health read or NVML code`;
  const reachable = gpu.checks['gpu.reachable'];
  if (reachable === undefined) {
    step.check(name, false, `${gpu.subject} has no gpu.reachable check`);
    return { index: gpu.index, reachable: null };
  }
  if (reachable.status === 'fail') {
    const code = reachable.evidence?.code;
    step.check(name, NVML_CODE.test(code ?? ''), `does not answer NVML (${code ?? 'no code'}): its health is not read`);
    return { index: gpu.index, reachable: false, code: code ?? null };
  }
  const whole = gpu.checks['gpu.health'];
  if (whole !== undefined) {
    // The health query as a whole failed: an NVML code is the driver's answer, anything else
    // (a hung call, GPUGATE_TIMEOUT) means the query did not work here.
    const code = whole.evidence?.code;
    step.check(name, NVML_CODE.test(code ?? ''), `the health query failed: ${code ?? 'no code'}${whole.evidence?.fn ? ` in ${whole.evidence.fn}` : ''}`);
    return { index: gpu.index, reachable: true, healthFailure: { code: code ?? null, fn: whole.evidence?.fn ?? null } };
  }
  const read = [];
  const codes = {};
  const bad = [];
  for (const [id, fields] of Object.entries(DOCTOR_HEALTH_READINGS)) {
    const basis = healthBasis(gpu.checks[id], fields);
    if (basis.kind === 'read') read.push(id);
    else if (basis.kind === 'code') codes[id] = basis.code;
    else bad.push(`${id}: ${basis.detail}`);
  }
  const total = Object.keys(DOCTOR_HEALTH_READINGS).length;
  const coded = Object.entries(codes).map(([id, code]) => `${id.replace(/^gpu\./, '')} ${code}`);
  step.check(name, bad.length === 0,
    bad.length === 0 ? `${read.length} of ${total} read${coded.length === 0 ? '' : `, NVML answered ${coded.join(', ')}`}` : bad.join('; '));
  return { index: gpu.index, reachable: true, read, nvmlCodes: codes };
}

function main() {
  const required = ['doctor', 'doctor-rc', 'doctor-stderr', 'schemas', 'out'];
  const o = parseOptions(process.argv.slice(2), [...required, 'status']);
  for (const name of required) {
    if (o[name] === undefined) {
      process.stderr.write(`doctor.cjs: --${name} is required\n`);
      process.exit(64);
    }
  }
  const step = new StepResult('doctor');
  const rc = Number(o['doctor-rc']);
  const doc = judgeCommandDocument(step, { command: 'doctor', file: o.doctor, stderrFile: o['doctor-stderr'], rc, accepted: DOCTOR_RESULT_CODES, schemaDir: o.schemas });
  if (doc === null) return step.write(o.out, '');
  if (doc.result === 'error') {
    step.check('gpugate doctor reports its checks', false, `it printed an error document instead: ${doc.error?.code ?? 'no code'}: ${doc.error?.message ?? ''}`);
    return step.write(o.out, '');
  }
  const tally = { pass: 0, warn: 0, fail: 0 };
  for (const c of doc.checks) tally[c.status] += 1;
  const worst = doc.checks.reduce((w, c) => (STATUS_RANK[c.status] > STATUS_RANK[w] ? c.status : w), 'pass');
  step.check('result is the worst check', doc.result === worst, `result ${doc.result}, worst check ${worst}`);

  const gpus = doctorGpus(doc);
  step.check('every GPU has its checks', gpus.length === doc.gpuCount && gpus.every((g, i) => g.index === i),
    `gpuCount ${doc.gpuCount}; checks for GPU(s) ${gpus.map((g) => g.index).join(', ') || 'none'}`);
  if (o.status !== undefined) {
    const status = readJson(o.status);
    let listed = null;
    try {
      listed = status.error === undefined ? statusDevices(status.value).length : null;
    } catch {
      listed = null;
    }
    if (listed === null) step.note(`gpugate status --json could not be read (${status.error ?? 'no GPU list'}): GPU count not compared`);
    else step.check('doctor sees the GPUs gpugate status lists', doc.gpuCount === listed, `doctor ${doc.gpuCount}, status ${listed}`);
  }
  const health = gpus.map((gpu) => judgeGpu(step, gpu));
  const findings = doc.checks.filter((c) => c.status !== 'pass').map((c) => ({ id: c.id, subject: c.subject, status: c.status, summary: c.summary }));
  step.data = { exitCode: rc, result: doc.result, gpuCount: doc.gpuCount, library: doc.library, tally, health, findings };
  const listedFindings = findings.slice(0, 6).map((f) => `${f.id} ${f.status}`).join(', ');
  step.write(o.out,
    `exit ${rc} (${doc.result}): ${doc.checks.length} checks, ${tally.pass} pass, ${tally.warn} warn, ${tally.fail} fail; ${gpus.length} GPU(s) checked` +
    (findings.length === 0 ? '' : `; findings: ${listedFindings}${findings.length > 6 ? `, +${findings.length - 6} more` : ''}`));
}

main();
