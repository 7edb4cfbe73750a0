#!/usr/bin/env node
// pack-check.cjs: the rules a packed gpugate tarball must follow (used by test/pack/pack.test.ts, and by
// hand: `node scripts/pack-check.cjs gpugate-x.y.z.tgz`). A user on a GPU host may have no compiler,
// so the tarball must carry a prebuilt addon and the simulator library for linux-x64; it must carry
// the sources and build files needed to build from source elsewhere; and it must not carry build
// output, tests or other development files.

'use strict';

const { execFileSync } = require('node:child_process');
const { posix } = require('node:path');

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
  // The command: the loader (bin), the bundle it runs, and the bundle's build-time code cache.
  'dist/cli/main.js',
  'dist/cli/gpugate-cli.js',
  'dist/cli/gpugate-cli.v8-cache',
  'native/nvml_abi.h',
  // An operator validates a new GPU host with the tarball alone (docs/hardware.md).
  'scripts/gpu-validate.sh',
];

/** Patterns that must each match at least one file: [description, pattern]. */
const REQUIRED_PATTERNS = [
  ['a prebuilt N-API addon for linux-x64', /^prebuilds\/linux-x64\/[^/]+\.node$/],
  ['the simulator library next to the prebuilt addon', /^prebuilds\/linux-x64\/gpugate_sim\.so$/],
  // The addon runs NVML in this executable, from beside its own file.
  ['the NVML helper next to the prebuilt addon', /^prebuilds\/linux-x64\/gpugate-nvml-helper$/],
  ['the addon C++ sources', /^native\/[^/]+\.cc$/],
  ['the NVML helper C++ sources', /^native\/helper\/[^/]+\.cc$/],
  ['the simulator C++ sources', /^sim\/[^/]+\.cc$/],
  ['at least one simulator scenario', /^scenarios\/[^/]+\.json$/],
  ['the JSON Schemas of the --json documents', /^schemas\/[^/]+\.schema\.json$/],
  ['the documentation README.md links to (docs/)', /^docs\/[^/]+\.md$/],
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

/** A Markdown link's target: `[text](target)`, the target without a title. */
const MARKDOWN_LINK = /\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g;

/** The anchor GitHub gives a heading: lower case, punctuation dropped, each blank a dash. */
function headingAnchor(heading) {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

/**
 * Returns every link of the package's Markdown files (README.md, docs/*.md) that points at
 * nothing once installed: a relative target that is not in the package, or an anchor that is
 * no heading of its target. Links to other sites are not followed.
 * @param {string[]} files paths inside the package
 * @param {(file: string) => string} readText reads a file of the package
 * @returns {string[]}
 */
function checkDocLinks(files, readText) {
  const set = new Set(files);
  const problems = [];
  const anchors = new Map();
  const anchorsOf = (file) => {
    if (!anchors.has(file)) {
      const headings = readText(file).split('\n').filter((line) => /^#{1,6} /.test(line)).map((line) => headingAnchor(line.replace(/^#+ /, '')));
      anchors.set(file, new Set(headings));
    }
    return anchors.get(file);
  };
  for (const file of files.filter((f) => f === 'README.md' || /^docs\/[^/]+\.md$/.test(f))) {
    for (const match of readText(file).matchAll(MARKDOWN_LINK)) {
      const target = match[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      const [path, anchor] = target.split('#');
      const dir = file.includes('/') ? file.slice(0, file.lastIndexOf('/')) : '';
      const resolved = path === '' ? file : posix.normalize(dir === '' ? path : `${dir}/${path}`);
      if (!set.has(resolved)) {
        problems.push(`${file} links to ${target}, which is not in the package`);
      } else if (anchor !== undefined && resolved.endsWith('.md') && !anchorsOf(resolved).has(anchor)) {
        problems.push(`${file} links to ${target}, but ${resolved} has no heading #${anchor}`);
      }
    }
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

module.exports = { REQUIRED_FILES, REQUIRED_PATTERNS, FORBIDDEN_PATTERNS, checkPackFiles, checkDocLinks, listTarball };

if (require.main === module) {
  const tarball = process.argv[2];
  if (!tarball) {
    console.error('usage: node scripts/pack-check.cjs <tarball.tgz>');
    process.exit(64);
  }
  const files = listTarball(tarball);
  const readText = (file) => execFileSync('tar', ['-xOzf', tarball, `package/${file}`], { encoding: 'utf8' });
  const problems = [...checkPackFiles(files), ...checkDocLinks(files, readText)];
  for (const p of problems) console.error(`pack-check: ${tarball}: ${p}`);
  if (problems.length === 0) console.error(`pack-check: ${tarball}: ok`);
  process.exit(problems.length === 0 ? 0 : 1);
}
