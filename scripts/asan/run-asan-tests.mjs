#!/usr/bin/env node
// run-asan-tests.mjs (`npm run test:asan`): builds the native targets with AddressSanitizer +
// UndefinedBehaviorSanitizer through cmake-js (CMakeLists.txt, -DGPUGATE_SANITIZE=ON) into
// build/sanitize/build/Release, then runs the native test suite against that build with leak
// detection, and fails on any sanitizer error or any leak made by gpugate's own code.
//
// How the pieces fit:
// - node itself is not instrumented, so libasan is put in front of it with LD_PRELOAD;
// - the tests run in a temporary copy of the working tree (node_modules linked) whose build/Release
//   holds the sanitizer build, so every way a test finds the addon or the simulator (node-gyp-build,
//   findSimLibrary, a literal build/Release path) finds the sanitizer build, and the working tree's
//   own build/ is left alone;
// - a leak must not change a process's exit status (tests assert those; LSan's own exit-time check
//   would replace it), so leak_check_at_exit=0 and leaks are checked with LSan's recoverable check
//   (the lsan-hook.c addon built here): in each vitest worker after the last test of its file
//   (vitest.asan.config.mjs + lsan-check-after-file.ts), and in every other Node process at its
//   'exit' event (leak-check-at-exit.cjs via NODE_OPTIONS: the CLI processes that tests start);
//   the NVML helper process (which inherits the environment, so the preload and the log path)
//   runs LSan's recoverable check itself before it returns from main (native/helper/main.cc);
//   other programs (the C clients of the simulator) are checked for memory errors, not leaks;
// - node leaks its V8 heap at exit: scripts/asan/lsan-node.supp suppresses those, and the log parser
//   (sanitizer-report.cjs) attributes each remaining leak by who allocated it;
// - a deliberately leaking canary addon proves the check is not blind: once in a plain Node process
//   before the suite, and once inside the suite (a test file written only into the temporary copy)
//   whose leak must be reported like any other.
//
// Usage: node scripts/asan/run-asan-tests.mjs [--no-build] [--keep-logs] [test files | vitest arguments]

import { execFileSync, spawnSync } from 'node:child_process';
import {
  cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import sanitizerReport from './sanitizer-report.cjs';

const { readSanitizerLogs } = sanitizerReport;
const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..');
const require = createRequire(join(root, 'package.json'));
const sanitizeDir = join(root, 'build', 'sanitize');
const sanitizeRelease = join(sanitizeDir, 'build', 'Release');
/** The native test files, by name, in whichever folder of test/ they live. */
const TEST_FILE_RE = /^(native-.*|session-.*|sim.*|nvml-helper)\.test\.ts$/;

class RunFailure extends Error {}

function fail(message) {
  throw new RunFailure(message);
}

function step(message) {
  console.error(`\n== test:asan: ${message}`);
}

/** A runtime library of the compiler that builds the addon, by file name. */
function compilerLibrary(name, hint) {
  const cxx = process.env.CXX || 'g++';
  let out;
  try {
    out = execFileSync(cxx, [`-print-file-name=${name}`], { encoding: 'utf8' }).trim();
  } catch (err) {
    fail(`cannot ask the C++ compiler (${cxx}) where ${name} is: ${err.message}`);
  }
  if (!out.startsWith('/') || !existsSync(out)) {
    fail(`the C++ compiler (${cxx}) has no ${name} (it answered "${out}"); ${hint}`);
  }
  return out;
}

/**
 * What to preload: the shared ASan runtime, then libstdc++. Without libstdc++ preloaded, a C program
 * that dlopens our C++ simulator (the tests' C clients) aborts at the first C++ throw: ASan's
 * __cxa_throw interceptor is resolved at start-up, before libstdc++ is loaded.
 */
function findPreloads() {
  return [
    compilerLibrary('libasan.so', "install the compiler's sanitizer runtime (Debian: libasan8, part of gcc-12)"),
    compilerLibrary('libstdc++.so.6', 'install libstdc++6'),
  ].join(':');
}

function requireCmake() {
  const r = spawnSync('cmake', ['--version'], { encoding: 'utf8' });
  if (r.error || r.status !== 0) {
    fail('cmake is not on PATH; install it (Debian: apt-get install -y cmake) and run again');
  }
}

function buildSanitized() {
  requireCmake();
  step('building the sanitizer build (cmake-js, -DGPUGATE_SANITIZE=ON) into build/sanitize/build/Release');
  const cmakeJs = require.resolve('cmake-js/bin/cmake-js');
  const r = spawnSync(process.execPath, [cmakeJs, 'compile', '--parallel', '2', '--out',
    join(sanitizeDir, 'build'), '--CDGPUGATE_SANITIZE=ON'], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) fail(`the sanitizer build failed (cmake-js exited with ${r.status ?? r.signal})`);
  for (const file of ['gpugate.node', 'gpugate-nvml-helper']) {
    if (!existsSync(join(sanitizeRelease, file))) fail(`the sanitizer build produced no ${join(sanitizeRelease, file)}`);
  }
}

/** Builds a Node-API addon from one C file of this directory (no sanitizer: libasan is preloaded). */
function buildHelperAddon(source, out) {
  const headers = require('node-api-headers').include_dir;
  const cc = process.env.CC || 'gcc';
  execFileSync(cc, ['-shared', '-fPIC', '-g', '-O0', '-fno-omit-frame-pointer', `-I${headers}`,
    '-o', out, join(here, source)], { stdio: 'inherit' });
  return out;
}

function sanitizerEnv(libasan, logDir, hook) {
  const supp = join(here, 'lsan-node.supp');
  return {
    ...process.env,
    LD_PRELOAD: [libasan, process.env.LD_PRELOAD].filter(Boolean).join(':'),
    ASAN_OPTIONS: [`log_path=${join(logDir, 'asan')}`, 'detect_leaks=1', 'leak_check_at_exit=0',
      'halt_on_error=1', 'detect_odr_violation=0', process.env.ASAN_OPTIONS].filter(Boolean).join(':'),
    LSAN_OPTIONS: [`suppressions=${supp}`, 'print_suppressions=0', process.env.LSAN_OPTIONS]
      .filter(Boolean).join(':'),
    NODE_OPTIONS: [process.env.NODE_OPTIONS, `--require=${join(here, 'leak-check-at-exit.cjs')}`]
      .filter(Boolean).join(' '),
    GPUGATE_LSAN_HOOK: hook,
    UBSAN_OPTIONS: [`log_path=${join(logDir, 'asan')}`, 'print_stacktrace=1', 'halt_on_error=1',
      process.env.UBSAN_OPTIONS].filter(Boolean).join(':'),
  };
}

const WORKER_CANARY_BYTES = 5151;
const WORKER_CANARY_TEST = `// Written by run-asan-tests.mjs into its temporary copy of the tree only.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { test } from 'vitest';
test('asan canary: a leak inside a vitest worker is reported', () => {
  const canary = join(dirname(process.env['GPUGATE_LSAN_HOOK'] ?? ''), 'gpugate-leak-canary.node');
  createRequire(__filename)(canary).leak(${WORKER_CANARY_BYTES});
});
`;

function isWorkerCanary(leak) {
  return leak.bytes === WORKER_CANARY_BYTES && leak.frames.some((f) => f.includes('leak-canary'));
}

/** Prints the reports; returns how many problems are ours and whether the worker canary was seen. */
function summarise(logDir, label) {
  const reports = readSanitizerLogs(logDir, root);
  let ours = 0;
  let foreignBytes = 0;
  let canarySeen = false;
  for (const report of reports) {
    for (const err of report.errors) {
      ours += 1;
      console.error(`\n[${label}] ${report.file}: ${err}\n${report.text}`);
    }
    for (const leak of report.leaks) {
      if (isWorkerCanary(leak)) {
        canarySeen = true;
      } else if (leak.owner === 'ours') {
        ours += 1;
        console.error(`\n[${label}] ${report.file}: leak made by gpugate's code:\n${leak.text}`);
      } else {
        foreignBytes += leak.bytes;
      }
    }
  }
  if (foreignBytes > 0) {
    console.error(`[${label}] ignored ${foreignBytes} bytes leaked by Node.js/V8 or other programs ` +
      '(not allocated by gpugate code)');
  }
  return { ours, canarySeen };
}

/** Proves that a leak made by our code is reported under the same settings. */
function checkCanary(libasan, workDir, hook) {
  step('checking that a leak made by our code is reported (leak canary)');
  const canary = buildHelperAddon('leak-canary.c', join(workDir, 'gpugate-leak-canary.node'));
  const logDir = join(workDir, 'canary-logs');
  mkdirSync(logDir);
  // Exit status 7 must survive the leak report: leaks are logged, never fatal.
  const r = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(canary)}).leak(4243); process.exitCode = 7`], {
    env: sanitizerEnv(libasan, logDir, hook), encoding: 'utf8',
  });
  if (r.status !== 7) fail(`the canary process ended with ${r.status ?? r.signal}, not its own status 7: ${r.stderr}`);
  const leaks = readSanitizerLogs(logDir, root).flatMap((rep) => rep.leaks);
  const found = leaks.find((l) => l.owner === 'ours' && l.bytes === 4243);
  if (!found) {
    fail('the leak check is blind: the canary leaked 4243 bytes but no report attributed them to ' +
      `our code (reports: ${JSON.stringify(leaks.map((l) => ({ bytes: l.bytes, owner: l.owner })))})`);
  }
  console.error('test:asan: the canary leak was reported and attributed to our code');
}

/** Paths of the working tree that are not copied (build output, dependencies, history). */
const NOT_COPIED = new Set(['.git', 'node_modules', 'build', 'prebuilds', '.tmp']);

/** A copy of the working tree whose build/Release is the sanitizer build. */
function makeTestTree(workDir) {
  const tree = join(workDir, 'tree');
  mkdirSync(tree);
  for (const name of readdirSync(root)) {
    if (NOT_COPIED.has(name) || name.endsWith('.tgz')) continue;
    cpSync(join(root, name), join(tree, name), { recursive: true, preserveTimestamps: true });
  }
  symlinkSync(join(root, 'node_modules'), join(tree, 'node_modules'), 'dir');
  const release = join(tree, 'build', 'Release');
  mkdirSync(release, { recursive: true });
  for (const name of readdirSync(sanitizeRelease)) {
    // The addon runs its NVML helper from beside its own file: the sanitizer build's helper goes there too.
    if (/\.(node|so)$/.test(name) || name === 'sim' || name === 'gpugate-nvml-helper') {
      cpSync(join(sanitizeRelease, name), join(release, name), { recursive: true });
    }
  }
  return tree;
}

function findTests(extraArgs) {
  const explicit = extraArgs.filter((a) => a.endsWith('.test.ts'));
  if (explicit.length > 0) return [];
  const testDir = join(root, 'test');
  const files = readdirSync(testDir, { recursive: true, encoding: 'utf8' })
    .filter((f) => TEST_FILE_RE.test(basename(f)) && !f.split('/').includes('node_modules'))
    .sort()
    .map((f) => join('test', f));
  if (files.length === 0) {
    fail('no native test files (native-*.test.ts, session-*.test.ts, sim*.test.ts under test/) found');
  }
  return files;
}

function main() {
  const args = process.argv.slice(2);
  const noBuild = args.includes('--no-build');
  const keepLogs = args.includes('--keep-logs');
  const vitestArgs = args.filter((a) => a !== '--no-build' && a !== '--keep-logs');
  const libasan = findPreloads();
  if (!noBuild) buildSanitized();
  else if (!existsSync(join(sanitizeRelease, 'gpugate.node'))) fail('--no-build, but there is no sanitizer build');

  const workDir = mkdtempSync(join(tmpdir(), 'gpugate-asan-'));
  try {
    const tree = makeTestTree(workDir);
    // node-gyp-build, as src/nvml/binding.ts calls it, must pick the sanitizer build in the copy.
    const resolved = execFileSync(process.execPath, ['-e',
      `process.stdout.write(require('node-gyp-build').resolve(${JSON.stringify(tree)}))`],
    { cwd: tree, env: { ...process.env, GPUGATE_PREBUILD: '', PREBUILDS_ONLY: '' }, encoding: 'utf8' });
    if (!readFileSync(resolved).equals(readFileSync(join(sanitizeRelease, 'gpugate.node')))) {
      fail(`node-gyp-build resolves ${resolved}, which is not the sanitizer build from ${sanitizeRelease}`);
    }

    const hook = buildHelperAddon('lsan-hook.c', join(workDir, 'lsan-hook.node'));
    checkCanary(libasan, workDir, hook);

    const canaryTest = join('test', 'zz-asan-worker-canary.test.ts');
    writeFileSync(join(tree, canaryTest), WORKER_CANARY_TEST);
    const found = findTests(vitestArgs);
    const files = found.length > 0 ? [...found, canaryTest] : [];
    if (files.length === 0) vitestArgs.push(canaryTest);
    step(`running ${files.length > 0 ? files.join(' ') : vitestArgs.join(' ')} under ASan + UBSan`);
    const logDir = join(workDir, 'logs');
    mkdirSync(logDir);
    const vitest = join(root, 'node_modules', 'vitest', 'vitest.mjs');
    if (!existsSync(vitest)) fail(`vitest is not installed (${vitest}); run npm ci first`);
    const r = spawnSync(process.execPath, [vitest, 'run', '--config', join(tree, 'scripts', 'asan', 'vitest.asan.config.mjs'),
      ...files, ...vitestArgs], {
      cwd: tree, stdio: 'inherit', env: { ...sanitizerEnv(libasan, logDir, hook), GPUGATE_PREBUILD: '', PREBUILDS_ONLY: '' },
    });
    const { ours, canarySeen } = summarise(logDir, 'test:asan');
    if (r.status !== 0) fail(`vitest failed (${r.status ?? r.signal}) under the sanitizers`);
    if (!canarySeen) {
      fail(`the leak check is blind inside vitest workers: the canary test leaked ${WORKER_CANARY_BYTES} bytes ` +
        'and no report showed it');
    }
    console.error('test:asan: the in-suite canary leak was reported (and is not counted as a failure)');
    if (ours > 0) fail(`${ours} sanitizer report(s) against gpugate's code (see above)`);
    console.error('\ntest:asan: passed: no sanitizer error and no leak in gpugate code');
  } finally {
    if (keepLogs) console.error(`test:asan: logs and the test tree kept in ${workDir}`);
    else rmSync(workDir, { recursive: true, force: true });
  }
}

try {
  main();
} catch (err) {
  console.error(`test:asan: ${err instanceof RunFailure ? err.message : err?.stack ?? err}`);
  process.exitCode = 1;
}
