// build-ts.mjs: `npm run build:ts`, the TypeScript half of the build. It removes dist/, compiles
// src/ with tsc (tsconfig.build.json) and bundles the command (scripts/bundle-cli.mjs).
//
//   node scripts/build-ts.mjs               always builds
//   node scripts/build-ts.mjs --if-changed  builds only when its inputs changed since the last build
//                                           (the package's `prepare` script and the test suites'
//                                           global setup)
//
// Why --if-changed: npm runs `prepare` again whenever it links this folder as a package. The
// quick start's `npx gpugate demo` in a fresh clone does exactly that (npx installs the local
// package into its cache to find its bin), and a rebuild there cost about 10 s of a newcomer's
// first minute for a dist/ that `npm install` had built moments before.
//
// The inputs: every file under src/, the tsconfig files, package.json, this script and the
// bundler, and the Node version (the bundle's code cache is made by, and only valid for, the
// Node that builds it). Their digest is kept in node_modules/.cache/gpugate/, beside the
// compiler it was built with, never in dist/ (which is packed), in a file named after this
// folder's path: a node_modules shared by several trees (the pack tests' staging copies link the
// clone's) must never let one tree's build vouch for another's dist/.

import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

/** The files besides src/ that shape dist/. */
const INPUT_FILES = ['package.json', 'tsconfig.json', 'tsconfig.build.json', 'scripts/build-ts.mjs', 'scripts/bundle-cli.mjs'];
/** What a complete dist/ has: without any of them the build runs whatever the digest says. */
const OUTPUT_FILES = ['dist/index.js', 'dist/index.mjs', 'dist/index.d.ts', 'dist/cli/main.js', 'dist/cli/gpugate-cli.js'];
const DIGEST_FILE = join(root, 'node_modules', '.cache', 'gpugate', `build-ts-${createHash('sha256').update(root).digest('hex').slice(0, 16)}.json`);

function filesUnder(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? filesUnder(path) : [path];
  });
}

/** One digest of every input's path and bytes, and of the Node version. */
export function inputsDigest() {
  const hash = createHash('sha256');
  hash.update(`node ${process.version}\n`);
  const files = [...filesUnder(join(root, 'src')), ...INPUT_FILES.map((file) => join(root, file))].map((file) => relative(root, file)).sort();
  for (const file of files) {
    const bytes = readFileSync(join(root, file));
    hash.update(`${file}\n${bytes.length}\n`);
    hash.update(bytes);
  }
  return hash.digest('hex');
}

function recordedDigest() {
  try {
    const record = JSON.parse(readFileSync(DIGEST_FILE, 'utf8'));
    return record.root === root ? record.digest ?? null : null;
  } catch {
    return null;
  }
}

/** Whether dist/ was built from exactly the inputs there are now. */
export function distIsCurrent() {
  return OUTPUT_FILES.every((file) => existsSync(join(root, file))) && recordedDigest() === inputsDigest();
}

/** Builds dist/ from scratch and records what it was built from. */
export function buildTs() {
  // Taken before the build: an input edited while tsc runs leaves the next run a rebuild.
  const digest = inputsDigest();
  rmSync(DIGEST_FILE, { force: true });
  rmSync(join(root, 'dist'), { recursive: true, force: true });
  execFileSync(process.execPath, [require.resolve('typescript/bin/tsc', { paths: [root] }), '-p', join(root, 'tsconfig.build.json')], { cwd: root, stdio: 'inherit' });
  execFileSync(process.execPath, [join(root, 'scripts', 'bundle-cli.mjs')], { cwd: root, stdio: 'inherit' });
  mkdirSync(dirname(DIGEST_FILE), { recursive: true });
  writeFileSync(DIGEST_FILE, `${JSON.stringify({ root, digest })}\n`);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  if (args.some((arg) => arg !== '--if-changed')) {
    process.stderr.write(`build-ts: unknown argument ${args.find((arg) => arg !== '--if-changed')} (expected nothing or --if-changed)\n`);
    process.exit(2);
  }
  if (args.includes('--if-changed') && distIsCurrent()) {
    process.stdout.write('build-ts: dist/ is current (built from these sources by this Node); nothing to do\n');
  } else {
    buildTs();
  }
}
