// bundle-cli.mjs: the last step of `npm run build:ts`, after tsc has compiled src/ into dist/.
// A start of `gpugate` used to resolve, read and compile ~90 files; bundled it reads two:
// - dist/cli/gpugate-cli.js: src/cli/main.ts and everything it uses, one CommonJS file (esbuild);
//   what a command loads only when it needs it stays behind a lazy init there (require()/import()
//   become esbuild's on-demand module initialisers), the package's dependencies stay require()s;
// - dist/cli/main.js (the package's bin): src/cli/bundle-loader.ts, which compiles the bundle with
//   its code cache and runs it (it replaces tsc's dist/cli/main.js, which did the same unbundled);
// - dist/cli/gpugate-cli.v8-cache: V8's code cache of the bundle, made here and only here, by a
//   `gpugate check` run in a child process against the simulator (so that the functions a check
//   runs are in it), or, without a built simulator, from compiling alone. The running command only
//   ever reads it (src/cli/code-cache.ts says when it trusts it).
//
// `node scripts/bundle-cli.mjs --make-cache` is that child.

import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { arch } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const cliDir = join(root, 'dist', 'cli');
const require = createRequire(import.meta.url);

/** Where the simulator library is: a local build first, then the prebuilt one (as in a packed package). */
function simulatorLibrary() {
  const candidates = [join(root, 'build', 'Release', 'gpugate_sim.so'), join(root, 'prebuilds', `linux-${arch()}`, 'gpugate_sim.so')];
  return candidates.find((file) => existsSync(file)) ?? null;
}

async function bundle() {
  const { BUNDLE_FILE, BUNDLE_HEAD, BUNDLE_TAIL, CACHE_FILE } = require(join(cliDir, 'code-cache.js'));
  // A cache of an earlier bundle must never sit beside a new one.
  rmSync(join(cliDir, CACHE_FILE), { force: true });
  const esbuild = await import('esbuild');
  const common = {
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node22',
    packages: 'external',
    logLevel: 'warning',
    // The bundle runs from dist/cli/, a folder deeper than the tsc output's root (src/package-root.ts).
    define: { GPUGATE_BUNDLED_CLI: 'true' },
  };
  // ASCII only, without comments or indentation: V8 then holds the source in one byte a character
  // and has less of it to read (names stay, for readable stack traces).
  const bundleFile = join(cliDir, BUNDLE_FILE);
  await esbuild.build({
    ...common,
    entryPoints: [join(root, 'src', 'cli', 'main.ts')],
    outfile: bundleFile,
    charset: 'ascii',
    minifyWhitespace: true,
    banner: { js: BUNDLE_HEAD },
    footer: { js: BUNDLE_TAIL },
  });
  // The entry's shebang line comes first in esbuild's output; this file is no program of its own.
  // esbuild wraps each `import * as path from 'node:path'` in __toESM(), which copies every
  // property of the module onto a new object when the module initialises (thirty copies, a
  // millisecond or two of each start); a Node built-in is used as it is, so it is required as it is.
  const text = readFileSync(bundleFile, 'latin1')
    .replace(/^#!.*\n/, '')
    .replace(/__toESM\(require\("(node:[a-z_/]+)"\)\)/g, 'require("$1")');
  writeFileSync(bundleFile, text, 'latin1');
  const nonAscii = /[^\x00-\x7f]/.exec(readFileSync(bundleFile, 'latin1'));
  if (nonAscii !== null) throw new Error(`bundle-cli: ${bundleFile} holds a non-ASCII character at offset ${nonAscii.index} (write it as an escape in src/)`);
  chmodSync(bundleFile, 0o644);
  await esbuild.build({
    ...common,
    entryPoints: [join(root, 'src', 'cli', 'bundle-loader.ts')],
    outfile: join(cliDir, 'main.js'),
    banner: { js: readFileSync(join(root, 'src', 'cli', 'main.ts'), 'utf8').split('\n')[0] },
  });
  chmodSync(join(cliDir, 'main.js'), 0o755);

  const library = simulatorLibrary();
  const env = { ...process.env };
  for (const name of ['NVIDIA_VISIBLE_DEVICES', 'CUDA_VISIBLE_DEVICES', 'SLURM_JOB_GPUS', 'JOURNAL_STREAM', 'NOTIFY_SOCKET', 'GPUGATE_SIM_STATS']) delete env[name];
  if (library !== null) {
    env.GPUGATE_NVML_LIBRARY = library;
    env.GPUGATE_SIM_SCENARIO = join(root, 'scenarios', 'idle-8x-rtx-pro-6000.json');
  }
  const makeCache = (how) => spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--make-cache', how], { env, stdio: 'inherit' });
  let child = makeCache(library === null ? 'compile' : 'check');
  if (child.status !== 0 && library !== null) {
    // A cache from compiling alone still spares most of the parsing; a failed warm-up must not fail the install.
    process.stderr.write(`bundle-cli: the check that warms the code cache failed (${child.signal ?? `exit ${child.status}`}); caching the compiled bundle alone\n`);
    child = makeCache('compile');
  }
  if (child.status !== 0) throw new Error(`bundle-cli: making the code cache failed (${child.signal ?? `exit ${child.status}`})`);
}

/** In the child: compile the bundle, run a check when a simulator is there, and store what V8 compiled. */
async function makeCache(how) {
  const { compileBundle, CACHE_FILE } = require(join(cliDir, 'code-cache.js'));
  const compiled = compileBundle(cliDir, false);
  if (how === 'check') {
    const module = { exports: {} };
    const bundleRequire = createRequire(compiled.file);
    compiled.script.runInThisContext()(module.exports, bundleRequire, module, compiled.file, cliDir);
    const quiet = { write: () => true, isTTY: false, columns: undefined };
    const code = await module.exports.main(['check', '--nvml-timeout', '10s'], process.env, { stdout: quiet, stderr: quiet, terminal: false, colour: false });
    if (code !== 0) throw new Error(`bundle-cli: the check that warms the code cache ended with exit ${code}`);
  }
  const temporary = join(cliDir, `${CACHE_FILE}.${process.pid}`);
  writeFileSync(temporary, compiled.script.createCachedData(), { mode: 0o644, flag: 'wx' });
  chmodSync(temporary, 0o644);
  renameSync(temporary, join(cliDir, CACHE_FILE));
  process.exit(0);
}

if (process.argv[2] === '--make-cache') await makeCache(process.argv[3]);
else await bundle();
