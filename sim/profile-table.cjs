'use strict';
/**
 * Reads the driver profile table (sim/driver_profiles.h) for the build and for gpugate's
 * TypeScript, so the table is written once. Run as a script (by binding.gyp and CMakeLists.txt) it
 * writes the linker version script of one profile and prints its path, or installs one profile's
 * built library under the driver's file name (where `LD_LIBRARY_PATH=<dir>` tools find it):
 *
 *   node sim/profile-table.cjs version-script <profile token> <output dir>
 *   node sim/profile-table.cjs install <profile token> <built library> <product dir>
 */
const fs = require('node:fs');
const path = require('node:path');

const TABLE = path.join(__dirname, 'driver_profiles.h');

/** @returns {{ profiles: Array<{token: string, name: string, firstDriver: number, v3EntryBytes: number}>, symbols: Array<{name: string, firstDriver: number, stub: boolean}>, cudaBranches: Array<{firstDriver: number, cudaDriverVersion: number}> }} */
function readProfileTable(file = TABLE) {
  const text = fs.readFileSync(file, 'utf8');
  const profiles = [];
  for (const m of text.matchAll(/^\s*P\((\w+), "([\w.-]+)", (\d+), (\d+), "[^"]*"\)/gm)) {
    profiles.push({ token: m[1], name: m[2], firstDriver: Number(m[3]), v3EntryBytes: Number(m[4]) });
  }
  const symbols = [];
  // X rows: implemented entry points; S rows: stubs answering NOT_SUPPORTED (see the table).
  for (const m of text.matchAll(/^\s*([XS])\((nvml\w+), (\d+)\)/gm)) symbols.push({ name: m[2], firstDriver: Number(m[3]), stub: m[1] === 'S' });
  const seen = new Set();
  for (const s of symbols) {
    if (seen.has(s.name)) throw new Error(`${file}: ${s.name} has more than one row`);
    seen.add(s.name);
  }
  const cudaBranches = [];
  for (const m of text.matchAll(/\bB\((\d+), (\d+)\)/g)) cudaBranches.push({ firstDriver: Number(m[1]), cudaDriverVersion: Number(m[2]) });
  if (profiles.length === 0 || symbols.length === 0 || cudaBranches.length === 0) throw new Error(`${file}: no profile, symbol or CUDA branch rows found`);
  return { profiles, symbols, cudaBranches };
}

/** A driver version's leading MAJOR.MINOR as major * 1000 + minor ("535.54.03": 535054), or null. */
function driverKey(version) {
  const m = /^(\d+)\.(\d{1,3})(?!\d)/.exec(String(version));
  return m === null ? null : Number(m[1]) * 1000 + Number(m[2]);
}

/** The CUDA driver version (12020 = 12.2) the branch of `version` reports, or null without a MAJOR.MINOR. */
function cudaDriverVersionFor(version, table = readProfileTable()) {
  const key = driverKey(version);
  if (key === null) return null;
  return table.cudaBranches.filter((b) => b.firstDriver <= key).at(-1)?.cudaDriverVersion ?? table.cudaBranches[0].cudaDriverVersion;
}

/** The NVML symbols the profile with `token` exports: those whose first driver it reaches. */
function exportedSymbols(token, table = readProfileTable()) {
  const profile = table.profiles.find((p) => p.token === token);
  if (profile === undefined) throw new Error(`unknown simulator profile ${token}; expected one of ${table.profiles.map((p) => p.token).join(', ')}`);
  return table.symbols.filter((s) => s.firstDriver <= profile.firstDriver).map((s) => s.name);
}

/** Writes `<dir>/<token>.map`, the version script exporting the profile's symbols and the extras. */
function writeVersionScript(token, dir) {
  const names = exportedSymbols(token);
  const text = [
    `/* Generated from sim/driver_profiles.h by sim/profile-table.cjs: the ${token} profile's exports. */`,
    '{',
    '  global:',
    ...names.map((n) => `    ${n};`),
    '    gpugateSim*;',
    '  local:',
    '    *;',
    '};',
    '',
  ].join('\n');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(path.resolve(dir), `${token}.map`);
  if (!fs.existsSync(file) || fs.readFileSync(file, 'utf8') !== text) fs.writeFileSync(file, text);
  return file;
}

/**
 * Where a profile's library is installed as libnvidia-ml.so.1, relative to the product directory:
 * sim/<profile name>/, and for the current driver also sim/ itself.
 */
function driverNamePaths(token, table = readProfileTable()) {
  const profile = table.profiles.find((p) => p.token === token);
  if (profile === undefined) throw new Error(`unknown simulator profile ${token}; expected one of ${table.profiles.map((p) => p.token).join(', ')}`);
  const own = path.join('sim', profile.name, 'libnvidia-ml.so.1');
  return token === 'current' ? [path.join('sim', 'libnvidia-ml.so.1'), own] : [own];
}

/** Copies `library` to each of the profile's driver-name paths under `productDir`; returns them. */
function installDriverNames(token, library, productDir) {
  return driverNamePaths(token).map((relative) => {
    const target = path.join(productDir, relative);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.copyFileSync(library, target);
    return target;
  });
}

module.exports = { readProfileTable, exportedSymbols, driverKey, cudaDriverVersionFor, writeVersionScript, driverNamePaths, installDriverNames };

if (require.main === module) {
  const [command, ...args] = process.argv.slice(2);
  if (command === 'version-script' && args.length === 2) {
    process.stdout.write(`${writeVersionScript(args[0], args[1])}\n`);
  } else if (command === 'install' && args.length === 3) {
    process.stdout.write(`${installDriverNames(args[0], args[1], args[2]).join('\n')}\n`);
  } else {
    process.stderr.write(
      'usage: node sim/profile-table.cjs version-script <profile token> <output dir>\n' +
        '       node sim/profile-table.cjs install <profile token> <built library> <product dir>\n',
    );
    process.exit(64);
  }
}
