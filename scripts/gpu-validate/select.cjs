'use strict';
/**
 * gpu-validate steps "select" and "select-lease": read `gpugate select --count N --json`, run
 * once with --no-lease and once leasing under a lease directory of the run's own. Whether a GPU
 * was free is recorded, not judged: exit 0 (selected) and 75 (fewer than N eligible) are both
 * results, and 69 (NVML unavailable) too when `gpugate status` could not read the GPUs either.
 * Judged is that the document is well-formed and consistent: its schema, the exit code it
 * states, N chosen GPUs that are eligible candidates known to `gpugate status --json`, a
 * CUDA_VISIBLE_DEVICES value of exactly their UUIDs, and leases as asked for: none, or one
 * record per chosen GPU in the lease directory, held by the given process.
 *
 * usage: node select.cjs --step NAME --select FILE --select-rc N --select-stderr FILE --schemas DIR
 *        --count N --out FILE [--status FILE] [--lease-dir DIR --lease-pid PID]
 */
const fs = require('node:fs');
const path = require('node:path');
const { StepResult, parseOptions, readJson } = require('./step-result.cjs');
const { statusDevices } = require('./gpugate-json.cjs');
const { judgeCommandDocument } = require('./command-document.cjs');

/** The UUIDs `gpugate status --json` lists, or null when it could not be read. */
function statusUuids(file) {
  if (file === undefined) return null;
  const status = readJson(file);
  if (status.error !== undefined) return null;
  try {
    return statusDevices(status.value).map((d) => d.uuid);
  } catch {
    return null;
  }
}

function judgeLeases(step, chosen, leaseDir, leasePid) {
  if (leaseDir === undefined) {
    step.check('no lease taken (--no-lease)', chosen.every((g) => g.lease === null), chosen.map((g) => `GPU ${g.index}: ${g.lease === null ? 'none' : g.lease.path}`).join(', '));
    return;
  }
  for (const g of chosen) {
    const expected = path.join(leaseDir, `${g.uuid}.lease`);
    const lease = g.lease;
    if (!step.check(`GPU ${g.index} leased in the lease directory`, lease !== null && lease.path === expected, `lease ${lease === null ? 'none' : lease.path}, expected ${expected}`)) continue;
    step.check(`GPU ${g.index} lease held by pid ${leasePid}`, lease.holderPid === Number(leasePid), `holderPid ${lease.holderPid} (${lease.holderComm ?? '?'})`);
    let kind;
    try {
      const stat = fs.lstatSync(expected);
      kind = stat.isFile() ? 'a regular file' : 'not a regular file';
    } catch (err) {
      kind = `absent (${err.code ?? err.message})`;
    }
    step.check(`GPU ${g.index} lease record written`, kind === 'a regular file', `${expected}: ${kind}`);
  }
}

function main() {
  const required = ['step', 'select', 'select-rc', 'select-stderr', 'schemas', 'count', 'out'];
  const o = parseOptions(process.argv.slice(2), [...required, 'status', 'lease-dir', 'lease-pid']);
  for (const name of required) {
    if (o[name] === undefined) {
      process.stderr.write(`select.cjs: --${name} is required\n`);
      process.exit(64);
    }
  }
  if ((o['lease-dir'] === undefined) !== (o['lease-pid'] === undefined)) {
    process.stderr.write('select.cjs: --lease-dir and --lease-pid go together\n');
    process.exit(64);
  }
  const step = new StepResult(o.step);
  const rc = Number(o['select-rc']);
  const count = Number(o.count);
  const known = statusUuids(o.status);
  // NVML unavailable is a result only where gpugate status could not read the GPUs either.
  const accepted = known === null ? [0, 75, 69] : [0, 75];
  const doc = judgeCommandDocument(step, { command: 'select', file: o.select, stderrFile: o['select-stderr'], rc, accepted, schemaDir: o.schemas });
  if (doc === null) return step.write(o.out, '');
  const chosen = doc.gpus;
  const eligible = doc.candidates.filter((c) => c.eligible);
  step.data = {
    exitCode: rc, result: doc.result, reason: doc.reason, count: doc.count, cudaVisibleDevices: doc.cudaVisibleDevices,
    chosen: chosen.map((g) => ({ index: g.index, uuid: g.uuid, numaNode: g.numaNode, lease: g.lease })),
    candidates: doc.candidates.map((c) => ({ index: c.index, uuid: c.uuid, eligible: c.eligible, exclusions: c.exclusions, placement: c.placement })),
  };
  step.check('count as asked', doc.count === count, `document count ${doc.count}, --count ${count}`);
  if (doc.result !== 'selected') {
    step.check('nothing chosen', chosen.length === 0 && doc.cudaVisibleDevices === null, `${chosen.length} GPU(s), CUDA_VISIBLE_DEVICES ${JSON.stringify(doc.cudaVisibleDevices)}`);
    if (rc === 75) step.check('fewer eligible than asked for', eligible.length < count || doc.result === 'lease-busy', `${eligible.length} of ${doc.candidates.length} eligible`);
    return step.write(o.out, `exit ${rc} (${doc.result}): ${doc.reason}`);
  }
  step.check(`${count} GPU(s) chosen`, chosen.length === count, chosen.map((g) => `GPU ${g.index}`).join(', ') || 'none');
  const uuids = chosen.map((g) => g.uuid).join(',');
  step.check('CUDA_VISIBLE_DEVICES names the chosen UUIDs', doc.cudaVisibleDevices === uuids, `${doc.cudaVisibleDevices}, chosen ${uuids}`);
  for (const g of chosen) {
    const candidate = doc.candidates.find((c) => c.uuid === g.uuid);
    step.check(`GPU ${g.index} is an eligible candidate`, candidate?.eligible === true && candidate.index === g.index,
      candidate === undefined ? 'not among the candidates' : `candidate ${candidate.index}, eligible ${candidate.eligible}, exclusions ${candidate.exclusions.join(',') || 'none'}`);
    if (known !== null) step.check(`GPU ${g.index} is a GPU gpugate status lists`, known.includes(g.uuid), `${g.uuid}; status lists ${known.join(', ')}`);
  }
  judgeLeases(step, chosen, o['lease-dir'], o['lease-pid']);
  step.write(o.out, `exit 0: ${doc.reason} (${eligible.length} of ${doc.candidates.length} eligible)`);
}

main();
