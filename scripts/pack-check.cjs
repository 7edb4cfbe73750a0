#!/usr/bin/env node
// pack-check.cjs: the rules a packed gpugate tarball must follow (used by test/pack.test.ts, and by
// hand: `node scripts/pack-check.cjs gpugate-x.y.z.tgz`). A user on a GPU host may have no compiler,
// so the tarball must carry a prebuilt addon and the simulator library for linux-x64; it must carry
// the sources and build files needed to build from source elsewhere; and it must not carry build
// output, tests or other development files.

'use strict';

const { execFileSync } = require('node:child_process');

/** Files that must be present (exact paths inside the package). */
const REQUIRED_FILES = [
  'package.json',
  'README.md',
  'LICENSE',
  'binding.gyp',
  'CMakeLists.txt',
  'dist/index.js',
  'dist/index.d.ts',
  'dist/index.mjs',
  'dist/index.d.mts',
  'native/nvml_abi.h',
  // An operator validates a new GPU host with the tarball alone (docs/hardware.md).
  'scripts/gpu-validate.sh',
];

/** Patterns that must each match at least one file: [description, pattern]. */
const REQUIRED_PATTERNS = [
  ['a prebuilt N-API addon for linux-x64', /^prebuilds\/linux-x64\/[^/]+\.node$/],
  ['the simulator library next to the prebuilt addon', /^prebuilds\/linux-x64\/gpugate_sim\.so$/],
  ['the addon C++ sources', /^native\/[^/]+\.cc$/],
  ['the simulator C++ sources', /^sim\/[^/]+\.cc$/],
  ['at least one simulator scenario', /^scenarios\/[^/]+\.json$/],
  ['the JSON Schemas of the --json documents', /^schemas\/[^/]+\.schema\.json$/],
];

/** Patterns no file may match: [description, pattern]. */
const FORBIDDEN_PATTERNS = [
  ['build output (build/)', /^build\//],
  ['tests', /(^|\/)(test|tests|__tests__)\/|\.test\.[cm]?[jt]s$|\.spec\.[cm]?[jt]s$/],
  ['node_modules', /(^|\/)node_modules\//],
  ['TypeScript sources (dist/ carries the compiled code)', /^src\//],
  ['an object file or archive', /\.(o|obj|a)$/],
  ['a packed tarball', /\.tgz$/],
  ['benchmark harness', /^bench\//],
  ['CI or editor settings', /^\.(ci|github|vscode)\//],
  ['a sanitizer build', /sanitize\//],
];

/**
 * Returns every problem with a tarball's file list (empty when it is fine).
 * @param {string[]} files paths inside the package, e.g. "dist/index.js"
 * @returns {string[]}
 */
function checkPackFiles(files) {
  const problems = [];
  const set = new Set(files);
  for (const f of REQUIRED_FILES) {
    if (!set.has(f)) problems.push(`missing ${f}`);
  }
  for (const [what, re] of REQUIRED_PATTERNS) {
    if (!files.some((f) => re.test(f))) problems.push(`missing ${what} (no file matches ${re})`);
  }
  for (const [what, re] of FORBIDDEN_PATTERNS) {
    const bad = files.filter((f) => re.test(f));
    if (bad.length > 0) problems.push(`contains ${what}: ${bad.slice(0, 5).join(', ')}${bad.length > 5 ? ', ...' : ''}`);
  }
  return problems;
}

/**
 * Lists the files of a .tgz made by npm pack (paths without the leading "package/").
 * @param {string} tarball
 */
function listTarball(tarball) {
  const out = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' });
  return out.split('\n').filter((l) => l && !l.endsWith('/')).map((l) => l.replace(/^package\//, ''));
}

module.exports = { REQUIRED_FILES, REQUIRED_PATTERNS, FORBIDDEN_PATTERNS, checkPackFiles, listTarball };

if (require.main === module) {
  const tarball = process.argv[2];
  if (!tarball) {
    console.error('usage: node scripts/pack-check.cjs <tarball.tgz>');
    process.exit(64);
  }
  const problems = checkPackFiles(listTarball(tarball));
  for (const p of problems) console.error(`pack-check: ${tarball}: ${p}`);
  if (problems.length === 0) console.error(`pack-check: ${tarball}: ok`);
  process.exit(problems.length === 0 ? 0 : 1);
}
