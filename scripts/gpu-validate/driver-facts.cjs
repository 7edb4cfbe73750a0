'use strict';
/**
 * gpu-validate step "driver": what the real driver does where gpugate's facts are unverified
 * (docs/hardware.md, "Open questions"), read by driver-facts.py straight from NVML (and libcuda),
 * printed and recorded, and compared with how `gpugate check --json` judged the same GPU.
 * Recorded (notes): the v2 memory semantics, the process lists' readability and per-process
 * memory, the recovery action, CUDA's total next to NVML's, and one CUDA context's cost.
 * Judged (checks): each reading fits one semantics gpugate accepts (else gpugate refuses the GPU,
 * exit 69, on every start); gpugate's reservedInUsed agrees with the driver's semantics; the
 * process lists answer a code gpugate explains (readable, NO_PERMISSION or NOT_SUPPORTED); the
 * recovery action is none or a documented action, or the field is unsupported by this driver;
 * gpugate's check of the chosen GPU ends with GPUGATE_RECOVERY_REQUIRED exactly when it is an action;
 * gpugate's `--for vllm` total (NVML total - reserved) is CUDA's measured total.
 *
 * usage: node driver-facts.cjs --facts FILE --facts-rc N --facts-stderr FILE --out FILE [--check FILE]
 */
const { StepResult, parseOptions, readJson, readText, mib } = require('./step-result.cjs');

/** The codes of an unreadable process list that gpugate explains as "holders unknown". */
const EXPLAINED_LIST_CODES = ['NVML_ERROR_NO_PERMISSION', 'NVML_ERROR_NOT_SUPPORTED'];
/** The answers of the recovery-action field on a driver that does not know it. */
const FIELD_UNKNOWN_CODES = ['NVML_ERROR_NOT_SUPPORTED', 'NVML_ERROR_INVALID_ARGUMENT', 'NVML_ERROR_FUNCTION_NOT_FOUND'];
/** How `gpugate check --json`'s reservedInUsed reads for each v2 semantics. */
const RESERVED_IN_USED = { 'used-includes-reserved': true, 'used-excludes-reserved': false };

function judgeGpu(step, gpu, gateGpu) {
  const label = `GPU ${gpu.index}`;
  if (gpu.error !== undefined) {
    step.note(`${label}: no handle (${gpu.error})`);
    return;
  }
  const v2 = gpu.memory.v2;
  if (v2.error !== undefined) {
    step.note(`${label}: v2 memory query ${v2.error}; v1 ${gpu.memory.v1.error ?? `used ${mib(gpu.memory.v1.usedBytes)}`}`);
  } else {
    step.note(`${label}: v2 memory semantics ${v2.semantics} (total ${mib(v2.totalBytes)}, reserved ${mib(v2.reservedBytes)}, free ${mib(v2.freeBytes)}, used ${mib(v2.usedBytes)})`);
    step.check(`${label} memory reading adds up`, v2.semantics !== 'neither', `semantics ${v2.semantics} (a reading whose sums fit neither way makes gpugate refuse the GPU, exit 69, on every start)`);
    const expected = RESERVED_IN_USED[v2.semantics];
    if (gateGpu !== undefined && expected !== undefined && gateGpu.reservedInUsed !== null && gateGpu.reservedInUsed !== undefined) {
      step.check(`${label} gpugate reads the same semantics`, gateGpu.reservedInUsed === expected, `gpugate reservedInUsed ${gateGpu.reservedInUsed}, driver ${v2.semantics}`);
    }
  }
  const list = gpu.processList;
  if (list.readable) {
    const memory = list.firstMemoryNotAvailable === true ? '; per-process memory "not available"' : '';
    step.note(`${label}: process list readable (${list.symbol}, ${list.count} process(es))${memory}`);
  } else {
    step.note(`${label}: process list unreadable: ${list.code} from ${list.symbol ?? 'no compute-list symbol'}`);
    step.check(`${label} process list answers a code gpugate explains`, EXPLAINED_LIST_CODES.includes(list.code), `${list.code} (gpugate explains ${EXPLAINED_LIST_CODES.join(', ')})`);
  }
  const recovery = gpu.recoveryAction;
  if (recovery.error !== undefined) {
    step.note(`${label}: recovery action field ${recovery.error}`);
    step.check(`${label} recovery action field answers`, FIELD_UNKNOWN_CODES.includes(recovery.error), `${recovery.error} (a driver without the field answers ${FIELD_UNKNOWN_CODES.join(', ')})`);
  } else {
    step.note(`${label}: recovery action ${recovery.action} (${recovery.value})`);
    step.check(`${label} recovery action is a documented one`, !recovery.action.startsWith('unknown'), `value ${recovery.value}`);
  }
}

/**
 * gpugate's `--for vllm` view of the GPU against CUDA's own figures: CUDA's total must be NVML's
 * total less reserved as gpugate computes it (else the criterion asks for the wrong amount); the
 * measured context next to gpugate's estimate for this model (src/gate/cuda-context-sizes.ts) is
 * recorded: a bare context is a lower bound of vLLM's, so a larger one is noted for the table.
 */
function judgeEngineView(step, cuda, gpu, gateGpu) {
  const view = gateGpu?.engineView;
  if (view === undefined || view === null) return;
  step.check(`GPU ${gpu} gpugate's vLLM total is CUDA's total`, view.cudaTotalBytes === cuda.cudaTotalBytes,
    `gpugate ${mib(view.cudaTotalBytes)} (NVML total - reserved), CUDA ${mib(cuda.cudaTotalBytes)}`);
  const over = cuda.contextBytes - view.contextBytes;
  step.note(`GPU ${gpu}: gpugate estimates vLLM's CUDA context at ${mib(view.contextBytes)}, one bare context measured ${mib(cuda.contextBytes)}${over > 0 ? ` (${mib(over)} more: add this model to src/gate/cuda-context-sizes.ts)` : ''}`);
}

/**
 * Whether `gpugate check` of the same GPU acted on the recovery action the driver reports: an
 * action must end it with GPUGATE_RECOVERY_REQUIRED, none must not. Judged only when both answered.
 */
function judgeGateRecovery(step, gpu, document) {
  const recovery = gpu?.recoveryAction;
  if (document === null || document === undefined || recovery === undefined || recovery.error !== undefined) return;
  const refused = document.error?.code === 'GPUGATE_RECOVERY_REQUIRED';
  step.check(`GPU ${gpu.index} gpugate acts on the recovery action`, refused === (recovery.action !== 'none'),
    `driver ${recovery.action}, gpugate check ${document.error?.code ?? document.result ?? 'no result'}`);
}

function noteCuda(step, cuda, gpu, gateGpu) {
  if (!cuda.available) {
    step.note(`GPU ${gpu}: no CUDA context measured (${cuda.reason})`);
    return;
  }
  judgeEngineView(step, cuda, gpu, gateGpu);
  const minusReserved = cuda.nvmlTotalMinusReservedBytes;
  const matches = minusReserved === null ? 'reserved unknown' : cuda.cudaTotalBytes === minusReserved ? 'equal to NVML total - reserved' : `NVML total - reserved is ${mib(minusReserved)}`;
  step.note(`GPU ${gpu}: CUDA total ${mib(cuda.cudaTotalBytes)}, NVML total ${mib(cuda.nvmlTotalBytes)} (${matches})`);
  step.note(`GPU ${gpu}: one CUDA context takes ${mib(cuda.contextBytes)} of NVML's free memory; CUDA then reports ${mib(cuda.cudaFreeWithContextBytes)} free`);
}

function main() {
  const o = parseOptions(process.argv.slice(2), ['facts', 'facts-rc', 'facts-stderr', 'out', 'check']);
  for (const name of ['facts', 'facts-rc', 'facts-stderr', 'out']) {
    if (o[name] === undefined) {
      process.stderr.write(`driver-facts.cjs: --${name} is required\n`);
      process.exit(64);
    }
  }
  const step = new StepResult('driver');
  const rc = Number(o['facts-rc']);
  if (rc === 3) {
    step.skip(`NVML could not be read directly: ${readText(o['facts-stderr']).trim()}`);
    step.write(o.out, '');
    return;
  }
  const facts = readJson(o.facts);
  if (!step.check('driver-facts.py ran', rc === 0 && facts.error === undefined, rc === 0 ? (facts.error ?? 'ok') : `exit ${rc}: ${readText(o['facts-stderr']).trim()}`)) {
    step.write(o.out, '');
    return;
  }
  const { value } = facts;
  const gate = o.check === undefined ? null : readJson(o.check);
  const gateGpus = gate?.value?.gpus ?? [];
  if (gate !== null && gate.error !== undefined) step.note(`gpugate check --json not read: ${gate.error}`);
  if (value.nestedPidNamespace === true) step.note('this run is in a nested PID namespace: NVML pids do not resolve here');
  for (const gpu of value.gpus) judgeGpu(step, gpu, gateGpus.find((g) => g.index === gpu.index));
  noteCuda(step, value.cuda, value.gpu, gateGpus.find((g) => g.index === value.gpu));
  step.data.facts = value;
  const chosen = value.gpus.find((g) => g.index === value.gpu);
  if (gate !== null && gate.error === undefined) judgeGateRecovery(step, chosen, gate.value);
  const semantics = chosen?.memory?.v2?.semantics ?? 'v2 unread';
  step.write(o.out, `driver ${value.driverVersion}: v2 ${semantics}; ${value.gpus.length} GPU(s) read`);
}

main();
