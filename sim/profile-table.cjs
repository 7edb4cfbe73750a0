'use strict';
/**
 * Reads the driver profile table (sim/driver_profiles.h) for the build and for gpugate's
 * TypeScript, so the table is written once. Run as a script it writes the linker version script
 * of one profile and prints its path (binding.gyp calls it while configuring):
 *
 *   node sim/profile-table.cjs version-script <profile token> <output dir>
 */
const fs = require('node:fs');
const path = require('node:path');

const TABLE = path.join(__dirname, 'driver_profiles.h');

/** @returns {{ profiles: Array<{token: string, name: string, firstDriver: number, v3EntryBytes: number}>, symbols: Array<{name: string, firstProfile: string}> }} */
function readProfileTable(file = TABLE) {
  const text = fs.readFileSync(file, 'utf8');
  const profiles = [];
  for (const m of text.matchAll(/^\s*P\((\w+), "([\w.-]+)", (\d+), (\d+), "[^"]*"\)/gm)) {
    profiles.push({ token: m[1], name: m[2], firstDriver: Number(m[3]), v3EntryBytes: Number(m[4]) });
  }
  const symbols = [];
  for (const m of text.matchAll(/^\s*X\((nvml\w+), (\w+)\)/gm)) symbols.push({ name: m[1], firstProfile: m[2] });
  const tokens = profiles.map((p) => p.token);
  for (const s of symbols) {
    if (!tokens.includes(s.firstProfile)) throw new Error(`${file}: ${s.name} names the unknown profile ${s.firstProfile}`);
  }
  if (profiles.length === 0 || symbols.length === 0) throw new Error(`${file}: no profile or symbol rows found`);
  return { profiles, symbols };
}

/** The NVML symbols the profile with `token` exports. */
function exportedSymbols(token, table = readProfileTable()) {
  const order = table.profiles.map((p) => p.token);
  const at = order.indexOf(token);
  if (at < 0) throw new Error(`unknown simulator profile ${token}; expected one of ${order.join(', ')}`);
  return table.symbols.filter((s) => order.indexOf(s.firstProfile) <= at).map((s) => s.name);
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

module.exports = { readProfileTable, exportedSymbols, writeVersionScript };

if (require.main === module) {
  const [command, token, dir] = process.argv.slice(2);
  if (command !== 'version-script' || !token || !dir) {
    process.stderr.write('usage: node sim/profile-table.cjs version-script <profile token> <output dir>\n');
    process.exit(64);
  }
  process.stdout.write(`${writeVersionScript(token, dir)}\n`);
}
