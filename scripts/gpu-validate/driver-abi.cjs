'use strict';
/**
 * gpu-validate step "driver-abi": what the NVML library does where gpugate's simulator imitates a
 * driver (the facts come from driver-abi.py), set against the simulator's driver profile table
 * (sim/driver_profiles.h), so that the first run on a real driver settles each imitation:
 *
 *   - every function the simulator's profile for this driver version exports is in the driver
 *     (a profile that exports more than its driver misleads clients that tell drivers by exports);
 *     the table's functions the driver has beyond the profile are listed (a later boundary);
 *   - the CUDA version the simulator derives from the driver version is the one the driver reports,
 *     and the NVML version starts with its major;
 *   - a GPU in MIG mode answers nvmlDeviceGetUtilizationRates NOT_SUPPORTED (3);
 *   - nvmlDeviceGetDriverModel_v2 and nvmlDeviceGetAddressingMode: recorded (the simulator answers
 *     NOT_SUPPORTED and NONE);
 *   - with `nm -D` output: NVML functions the driver exports that the table does not know.
 *
 *   node driver-abi.cjs --facts FILE --facts-rc N --facts-stderr FILE --table FILE [--nm FILE] --out FILE
 */
const { StepResult, parseOptions, readJson, readText } = require('./step-result.cjs');

const NOT_SUPPORTED = 3;
const options = parseOptions(process.argv.slice(2), ['facts', 'facts-rc', 'facts-stderr', 'table', 'nm', 'out']);
const table = require(options.table);
const result = new StepResult('driver-abi');

function first(list, n = 12) {
  return list.length <= n ? list.join(', ') : `${list.slice(0, n).join(', ')} and ${list.length - n} more`;
}

function judge() {
  if (options['facts-rc'] !== '0') {
    const why = readText(options['facts-stderr']).trim();
    if (options['facts-rc'] === 'no-python') return result.skip('no python3 on PATH to read the library with ctypes');
    return result.check('library read', false, `driver-abi.py exited ${options['facts-rc']}: ${why}`);
  }
  const read = readJson(options.facts);
  if (read.error !== undefined) return result.check('library read', false, read.error);
  const facts = read.value;
  const profiles = table.readProfileTable();
  const key = table.driverKey(facts.driverVersion);
  if (key === null) return result.check('driver version', false, `expected MAJOR.MINOR..., found ${JSON.stringify(facts.driverVersion)}`);
  const profile = profiles.profiles.filter((p) => p.firstDriver <= key).at(-1) ?? profiles.profiles[0];
  const exported = table.exportedSymbols(profile.token, profiles);
  result.data = { libraryPath: facts.libraryPath, driverVersion: facts.driverVersion, profile: profile.name, devices: facts.devices };
  result.note(`driver ${facts.driverVersion} (${facts.libraryPath ?? 'path unknown'}): the simulator's ${profile.name} profile`);

  const lacking = exported.filter((name) => facts.symbols[name] === false);
  result.check('profile exports', lacking.length === 0, lacking.length === 0
    ? `the driver has all ${exported.length} functions the ${profile.name} profile exports`
    : `the ${profile.name} profile exports ${lacking.length} function(s) this driver lacks: ${first(lacking)}`);
  const beyond = profiles.symbols.map((s) => s.name).filter((name) => facts.symbols[name] === true && !exported.includes(name));
  result.data.beyondProfile = beyond;
  if (beyond.length > 0) result.note(`the driver has ${beyond.length} table function(s) the ${profile.name} profile lacks: ${first(beyond)}`);

  const cuda = table.cudaDriverVersionFor(facts.driverVersion, profiles);
  result.check('CUDA version', facts.cudaDriverVersion === cuda,
    `the driver reports ${facts.cudaDriverVersion}; the simulator derives ${cuda} for ${facts.driverVersion}`);
  const nvmlMajor = Number(String(facts.nvmlVersion).split('.')[0]);
  result.check('NVML version', nvmlMajor === Math.floor(facts.cudaDriverVersion / 1000),
    `the driver reports ${JSON.stringify(facts.nvmlVersion)} with CUDA ${facts.cudaDriverVersion}`);

  const inMig = facts.devices.filter((d) => Array.isArray(d.migMode) && d.migMode[0] === 0 && d.migMode[1] === 1);
  for (const d of inMig) {
    result.check(`GPU ${d.index} utilization in MIG mode`, d.utilization[0] === NOT_SUPPORTED,
      `nvmlDeviceGetUtilizationRates answered ${d.utilization[0]} (the simulator answers ${NOT_SUPPORTED}, NOT_SUPPORTED)`);
  }
  if (inMig.length === 0) result.note('no GPU is in MIG mode: utilisation in MIG mode is not settled on this host');
  for (const d of facts.devices) {
    if (!Array.isArray(d.driverModelV2)) continue;
    result.note(`GPU ${d.index}: nvmlDeviceGetDriverModel_v2 rc ${d.driverModelV2[0]}, nvmlDeviceGetAddressingMode rc ${d.addressingMode[0]} value ${d.addressingMode[1]}` +
      ' (the simulator: 3, and 0 with mode NONE)');
  }

  if (options.nm !== undefined) {
    const known = new Set(profiles.symbols.map((s) => s.name));
    const text = readText(options.nm);
    const unknown = [...text.matchAll(/^\S*\s+[TW]\s+(nvml\w+)/gm)].map((m) => m[1]).filter((n) => !known.has(n) && n !== 'nvmlErrorString');
    result.data.unknownToTable = [...new Set(unknown)].sort();
    result.note(`nm -D: the driver exports ${result.data.unknownToTable.length} NVML function(s) the table does not know` +
      (unknown.length > 0 ? `: ${first(result.data.unknownToTable)}` : ''));
  }
  return undefined;
}

judge();
result.write(options.out, `driver ${result.data.driverVersion ?? '?'}: the ${result.data.profile ?? '?'} profile's exports, versions and quirks agree`);
