'use strict';
/**
 * gpu-validate step "identity": gpugate's view of the GPUs (`gpugate status --json`) against
 * nvidia-smi's CSV and, when it was importable, pynvml's: same count, UUIDs, PCI bus ids and
 * names; totals exact (to nvidia-smi's 1 MiB resolution, to the byte against pynvml); used
 * within a tolerance (memory moves on a live host). Prints the library gpugate bound, its symbol
 * variants and the driver version.
 *
 * usage: node identity.cjs --status FILE --smi FILE --used-tolerance-mib N --out FILE [--library FILE]
 *        [--smi-note TEXT] [--pynvml FILE | --pynvml-skip REASON | --pynvml-error TEXT]
 */
const { StepResult, parseOptions, readJson, readText, mib, MIB } = require('./step-result.cjs');
const { parseNvidiaSmiCsv } = require('./nvidia-smi-csv.cjs');
const { statusDevices, statusLibrary } = require('./gpugate-json.cjs');

/** '0000:1b:00.0' and '00000000:1B:00.0' name the same function. */
function normalizeBusId(text) {
  if (typeof text !== 'string') return String(text);
  const match = /^([0-9a-f]+):([0-9a-f]{2}):([0-9a-f]{2})\.([0-9a-f])$/i.exec(text.trim());
  if (match === null) return text.trim().toLowerCase();
  return `${(match[1] ?? '').padStart(8, '0')}:${match[2]}:${match[3]}.${match[4]}`.toLowerCase();
}

function compareIdentity(step, who, gpugate, other, totalsWithinMiB, toleranceBytes) {
  step.check(`${who}: GPU count`, gpugate.length === other.length, `gpugate ${gpugate.length}, ${who} ${other.length}`);
  for (const g of gpugate) {
    const o = other.find((x) => Number(x.index) === Number(g.index));
    if (o === undefined) {
      step.check(`${who}: GPU ${g.index} present`, false, `${who} has no GPU with index ${g.index}`);
      continue;
    }
    const tag = `${who}: GPU ${g.index}`;
    step.check(`${tag} uuid`, g.uuid === o.uuid, `gpugate ${g.uuid}, ${who} ${o.uuid}`);
    step.check(`${tag} bus id`, normalizeBusId(g.pciBusId) === normalizeBusId(o.pciBusId), `gpugate ${g.pciBusId}, ${who} ${o.pciBusId}`);
    step.check(`${tag} name`, g.name === o.name, `gpugate ${JSON.stringify(g.name)}, ${who} ${JSON.stringify(o.name)}`);
    if (g.totalBytes === null || o.totalBytes === null) {
      step.check(`${tag} total`, false, `gpugate ${mib(g.totalBytes)}, ${who} ${mib(o.totalBytes)} (one side could not read it)`);
    } else {
      const exact = totalsWithinMiB ? Math.abs(g.totalBytes - o.totalBytes) < MIB : g.totalBytes === o.totalBytes;
      step.check(`${tag} total`, exact, `gpugate ${g.totalBytes} B (${mib(g.totalBytes)}), ${who} ${totalsWithinMiB ? mib(o.totalBytes) : `${o.totalBytes} B`}`);
    }
    // Compare like with like: v2 used excludes reserved, v1 used (and old nvidia-smi) includes it.
    // When only one side says how much is reserved, the other side's used may be either kind.
    const bothReserved = g.reservedBytes !== null && o.reservedBytes !== null;
    const bases = [];
    if (g.usedBytes !== null && o.usedBytes !== null) {
      if (bothReserved || (g.reservedBytes === null && o.reservedBytes === null)) {
        const basis = bothReserved ? 'excluding reserved' : g.memorySource === 'v1' ? 'including reserved' : 'as reported';
        bases.push({ basis, g: g.usedBytes, o: o.usedBytes });
      } else {
        bases.push({ basis: 'excluding reserved', g: g.usedBytes, o: o.usedBytes });
        bases.push({ basis: 'including reserved', g: g.usedBytes + (g.reservedBytes ?? 0), o: o.usedBytes + (o.reservedBytes ?? 0) });
      }
    }
    if (bases.length === 0) {
      step.note(`${tag} used not compared: gpugate ${mib(g.usedBytes)}, ${who} ${mib(o.usedBytes)} (not available on one side)`);
    } else {
      const match = bases.find((b) => Math.abs(b.g - b.o) <= toleranceBytes) ?? bases[bases.length - 1];
      step.check(`${tag} used`, Math.abs(match.g - match.o) <= toleranceBytes,
        `gpugate ${mib(match.g)}, ${who} ${mib(match.o)} (${match.basis}; tolerance ${mib(toleranceBytes)})`);
    }
    if (bothReserved) {
      step.check(`${tag} reserved`, Math.abs(g.reservedBytes - o.reservedBytes) <= (totalsWithinMiB ? MIB : 0) + toleranceBytes,
        `gpugate ${mib(g.reservedBytes)}, ${who} ${mib(o.reservedBytes)}`);
    }
  }
}

function main() {
  const o = parseOptions(process.argv.slice(2), ['status', 'library', 'smi', 'smi-note', 'pynvml', 'pynvml-skip', 'pynvml-error', 'used-tolerance-mib', 'out']);
  for (const required of ['status', 'smi', 'used-tolerance-mib', 'out']) {
    if (o[required] === undefined) {
      process.stderr.write(`identity.cjs: --${required} is required\n`);
      process.exit(64);
    }
  }
  const toleranceBytes = Number(o['used-tolerance-mib']) * MIB;
  const step = new StepResult('identity');
  const write = (summary) => step.write(o.out, summary);

  const status = readJson(o.status);
  if (!step.check('gpugate status --json parses', status.error === undefined, status.error ?? 'one JSON object')) return write('');
  let gpugate;
  try {
    gpugate = statusDevices(status.value);
  } catch (err) {
    step.check('gpugate status --json has devices', false, err.message);
    return write('');
  }
  for (const g of gpugate) {
    if (g.error !== null) step.check(`gpugate: GPU ${g.index} readable`, false, `${g.error.code ?? ''} ${g.error.message ?? JSON.stringify(g.error)}`);
  }
  // The variants come from the status JSON when it carries them, else from library-info.cjs.
  let library = statusLibrary(status.value);
  if (o.library !== undefined && (library === null || library.variants === undefined)) {
    const info = readJson(o.library);
    if (info.error === undefined) library = { ...(library ?? {}), ...info.value };
  }
  step.data.gpus = gpugate.map((g) => ({ index: g.index, name: g.name, uuid: g.uuid, pciBusId: g.pciBusId, totalBytes: g.totalBytes, memorySource: g.memorySource }));
  step.data.library = library;
  if (library !== null) {
    process.stdout.write(`  info library ${library.path ?? '?'}; driver ${library.driverVersion ?? '?'}; NVML ${library.nvmlVersion ?? '?'}; CUDA ${library.cudaDriverVersion ?? '?'}\n`);
    const variants = Object.entries(library.variants ?? {}).map(([fn, sym]) => `${fn}=${sym ?? 'none'}`);
    process.stdout.write(`  info symbol variants bound: ${variants.join(' ') || 'not reported'}\n`);
  } else {
    step.note('gpugate status --json reports no "library" (driver version and symbol variants unknown)');
  }
  step.data.memorySources = [...new Set(gpugate.map((g) => g.memorySource))];

  let smiRows;
  try {
    smiRows = parseNvidiaSmiCsv(readText(o.smi));
  } catch (err) {
    step.check('nvidia-smi CSV parses', false, err.message);
    return write('');
  }
  if (o['smi-note'] !== undefined) step.note(o['smi-note']);
  const smi = smiRows.map((r) => ({
    index: r.index,
    uuid: r.uuid,
    pciBusId: r['pci.bus_id'],
    name: r.name,
    totalBytes: r['memory.total'] ?? null,
    usedBytes: r['memory.used'] ?? null,
    reservedBytes: r['memory.reserved'] ?? null,
  }));
  compareIdentity(step, 'nvidia-smi', gpugate, smi, true, toleranceBytes);

  let compared = 'nvidia-smi';
  if (o['pynvml-error'] !== undefined) {
    step.check('pynvml reads the GPUs', false, o['pynvml-error']);
  } else if (o['pynvml-skip'] !== undefined) {
    step.note(`pynvml not compared: ${o['pynvml-skip']}`);
    step.data.pynvml = { skipped: o['pynvml-skip'] };
  } else if (o.pynvml !== undefined) {
    const py = readJson(o.pynvml);
    if (step.check('pynvml output parses', py.error === undefined, py.error ?? 'one JSON object')) {
      compareIdentity(step, 'pynvml', gpugate, py.value.devices ?? [], false, toleranceBytes);
      if (library !== null && py.value.driverVersion !== undefined) {
        step.check('pynvml: driver version', library.driverVersion === py.value.driverVersion,
          `gpugate ${library.driverVersion}, pynvml ${py.value.driverVersion}`);
      }
      compared += ' and pynvml';
    }
  }
  const names = [...new Set(gpugate.map((g) => g.name))].join(', ');
  write(`${gpugate.length} GPU(s) (${names}) match ${compared}: uuids, bus ids, names, totals exact, used within ${o['used-tolerance-mib']} MiB; driver ${library?.driverVersion ?? '?'}`);
}

main();
