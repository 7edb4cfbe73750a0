'use strict';
/**
 * The one place that knows the shape of gpugate's JSON output (`status --json`, `holders --json`,
 * `wait --json`, `doctor --json`, `select --json`) and of its `-v` logfmt progress lines, as
 * gpu-validate reads them.
 */

/** The per-GPU array of a gpugate JSON document (`gpus`, as `wait`/`check`/`status` print it). */
function gpusOf(doc) {
  const gpus = doc.gpus ?? doc.devices;
  if (!Array.isArray(gpus)) throw new Error('the JSON has no "gpus" array');
  return gpus;
}

/** The per-GPU records of `gpugate status --json`, reduced to what the identity check compares. */
function statusDevices(status) {
  return gpusOf(status).map((d) => {
    const memory = d.memory ?? d;
    return {
      index: d.index,
      uuid: d.uuid,
      pciBusId: d.pciBusId,
      name: d.name,
      totalBytes: memory?.totalBytes ?? null,
      usedBytes: memory?.usedBytes ?? null,
      reservedBytes: memory?.reservedBytes ?? null,
      memorySource: memory?.source ?? d.memorySource ?? null,
      error: d.error ?? null,
    };
  });
}

/** `{ path, driverVersion, nvmlVersion, cudaDriverVersion, variants }` from `status --json`, or null. */
function statusLibrary(status) {
  return status.library ?? null;
}

/**
 * Every classified holder in `gpugate holders --json` as `{ pid, class, gpus, usedBytes, comm, reason }`,
 * one entry per pid and GPU (gpugate lists holders under each GPU).
 */
function holdersOf(report) {
  if (Array.isArray(report.holders)) return report.holders;
  return gpusOf(report).flatMap((gpu) =>
    (Array.isArray(gpu.holders) ? gpu.holders : []).map((h) => ({ ...h, gpus: Array.isArray(h.gpus) && h.gpus.length > 0 ? h.gpus : [gpu.index] })),
  );
}

/**
 * The figures gpu-validate reports from `gpugate bench --json` (a BenchResult of src/bench/run-bench.ts,
 * possibly inside the command's result object): gpugate's memory-only snapshot median / p99 and
 * the with-processes median, nvidia-smi's median per run, in milliseconds.
 */
function benchFigures(doc) {
  const candidates = [doc, ...Object.values(doc).filter((v) => v !== null && typeof v === 'object')];
  const result = candidates.find((c) => c.memoryOnly?.perSnapshot !== undefined);
  if (result === undefined) throw new Error('gpugate bench --json has no memoryOnly.perSnapshot figures');
  const toMs = (us) => (typeof us === 'number' ? us / 1000 : null);
  const smi = result.nvidiaSmi ?? null;
  return {
    devices: result.deviceCount ?? null,
    samples: result.memoryOnly.perSnapshot.samples ?? null,
    gpugateMedianMs: toMs(result.memoryOnly.perSnapshot.medianUs),
    gpugateP99Ms: toMs(result.memoryOnly.perSnapshot.p99Us),
    gpugateWithProcessesMedianMs: toMs(result.withProcesses?.perSnapshot?.medianUs),
    nvidiaSmiMedianMs: toMs(smi?.perRun?.medianUs),
    nvidiaSmiSkipped: smi === null ? 'gpugate bench found no nvidia-smi' : (smi.error ?? null),
    stoppedByDuration: result.stoppedByDuration ?? null,
  };
}

/**
 * One `-v` progress line (logfmt after an optional `<N>` priority: `event=NAME key=value …`, or
 * `gpugate: NAME key=value …` as versions before the logfmt log wrote it) as `{ event, fields }`,
 * or null for a line that is not one.
 */
function parseLogLine(line) {
  const match = /^(?:<\d>)?(?:gpugate: |event=)(\S+)\s*(.*)$/.exec(line.trim());
  if (match === null) return null;
  const fields = {};
  const pair = /([A-Za-z_][\w.]*)=("(?:[^"\\]|\\.)*"|\S*)/g;
  for (let m = pair.exec(match[2] ?? ''); m !== null; m = pair.exec(match[2] ?? '')) {
    const raw = m[2] ?? '';
    fields[m[1] ?? ''] = raw.startsWith('"') ? JSON.parse(raw) : raw;
  }
  return { event: match[1] ?? '', fields };
}

/**
 * The holders a progress line names (`holders=4242/VLLM::Worker_TP6/draining,…`) as
 * `{ pid, comm, class }`; the comm may itself contain slashes, the class is the last part.
 */
function holdersInLogLine(fields) {
  const text = fields.holders;
  if (typeof text !== 'string' || text === '' || text === 'none' || text === '-') return [];
  return text.split(',').flatMap((entry) => {
    const parts = entry.split('/');
    const pid = Number(parts[0]);
    if (parts.length < 2 || !Number.isInteger(pid)) return [];
    return [{ pid, comm: parts.slice(1, -1).join('/'), class: parts[parts.length - 1] ?? '' }];
  });
}

/**
 * The checks `gpugate doctor` makes of each reachable GPU from its health reading (the native
 * health query), with the evidence fields a reading leaves; a query that failed leaves its NVML
 * code (`evidence.code`) instead.
 */
const DOCTOR_HEALTH_READINGS = {
  'gpu.mig-mode': ['current', 'pending'],
  'gpu.remapped-rows': ['correctable', 'uncorrectable', 'pending', 'failureOccurred'],
  'gpu.ecc-errors': ['volatileUncorrected'],
  'gpu.retired-pages': ['pending'],
  'gpu.clock-events': ['reasons', 'bits'],
  'gpu.pcie-link': ['generation', 'maxGeneration', 'width', 'maxWidth'],
  'gpu.fabric': ['state', 'status', 'cliqueId'],
};

/**
 * The checks of `doctor --json` grouped by GPU (their subject is `GPU <index> (<uuid>)`), as
 * `{ index, subject, checks }` in index order, `checks` keyed by check id.
 */
function doctorGpus(doc) {
  const byIndex = new Map();
  for (const check of Array.isArray(doc.checks) ? doc.checks : []) {
    const match = /^GPU (\d+) \(/.exec(check.subject ?? '');
    if (match === null) continue;
    const index = Number(match[1]);
    if (!byIndex.has(index)) byIndex.set(index, { index, subject: check.subject, checks: {} });
    byIndex.get(index).checks[check.id] = check;
  }
  return [...byIndex.values()].sort((a, b) => a.index - b.index);
}

module.exports = { gpusOf, statusDevices, statusLibrary, holdersOf, benchFigures, parseLogLine, holdersInLogLine, DOCTOR_HEALTH_READINGS, doctorGpus };

// As a command, for gpu-validate.sh:
//   node gpugate-json.cjs gpu-field FILE INDEX FIELD   prints uuid|totalBytes|freeBytes|usedBytes of GPU INDEX
//   node gpugate-json.cjs has-holder FILE PID          exits 0 when `holders --json` lists PID, else 1
if (require.main === module) {
  const [command, file, a, b] = process.argv.slice(2);
  const fail = (message) => {
    process.stderr.write(`gpugate-json.cjs: ${message}\n`);
    process.exit(64);
  };
  let doc;
  try {
    doc = JSON.parse(require('node:fs').readFileSync(file ?? '', 'utf8'));
  } catch (err) {
    if (command === 'has-holder') process.exit(1);
    fail(`cannot read ${file} as JSON: ${err.message}`);
  }
  if (command === 'gpu-field' && a !== undefined && b !== undefined) {
    const gpu = gpusOf(doc).find((g) => g.index === Number(a));
    if (gpu === undefined) process.exit(1);
    const memory = gpu.memory ?? gpu;
    const value = b === 'uuid' ? gpu.uuid : memory[b];
    if (value === undefined || value === null) process.exit(1);
    process.stdout.write(`${value}\n`);
  } else if (command === 'has-holder' && a !== undefined) {
    let holders = [];
    try {
      holders = holdersOf(doc);
    } catch {
      process.exit(1);
    }
    process.exit(holders.some((h) => h.pid === Number(a)) ? 0 : 1);
  } else {
    fail('usage: node gpugate-json.cjs gpu-field FILE INDEX FIELD | has-holder FILE PID');
  }
}
