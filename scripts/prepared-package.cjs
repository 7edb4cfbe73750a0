// prepared-package.cjs: builds the package the way a release would, away from the working tree,
// for the pack smoke test and the multi-Node test (and by hand: `node scripts/prepared-package.cjs`).
//
// It copies what package.json's `files` lists (plus the TypeScript sources and configs needed to
// compile dist/) into a staging directory, compiles dist/ with `npm run build:ts`, runs
// scripts/prebuild-linux.mjs there (prebuildify: build/ of the staging copy is replaced, never the
// working tree's), and packs it with `npm pack`. The result is cached under the OS temp directory,
// keyed by a hash of every staged file and the Node version, behind a lock, so two test files that
// need it build it once.

'use strict';

const { spawnSync } = require('node:child_process');
const { createHash } = require('node:crypto');
const {
  cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync,
  writeFileSync,
} = require('node:fs');
const { tmpdir } = require('node:os');
const { join, relative, resolve } = require('node:path');

const repoRoot = resolve(__dirname, '..');

/** Build outputs never staged from the working tree (they are produced in the staging copy). */
const NEVER_STAGED = new Set(['build', 'prebuilds', 'dist', 'node_modules']);

/** The repository paths that go into the staging copy. */
function stagedPaths() {
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
  const paths = new Set(['package.json', 'src', 'tsconfig.json', 'tsconfig.build.json']);
  for (const entry of pkg.files ?? []) {
    if (!NEVER_STAGED.has(entry)) paths.add(entry);
  }
  return [...paths].filter((p) => existsSync(join(repoRoot, p))).sort();
}

function listFiles(rel) {
  const abs = join(repoRoot, rel);
  if (statSync(abs).isFile()) return [rel];
  return readdirSync(abs).sort().flatMap((name) => listFiles(join(rel, name)));
}

/** A hash of every staged file's path and content, and of the Node major version. */
function stagingKey() {
  const hash = createHash('sha256');
  hash.update(`node ${process.versions.node.split('.')[0]} ${process.platform}-${process.arch}\n`);
  for (const rel of stagedPaths().flatMap(listFiles)) {
    hash.update(`${rel}\n`);
    hash.update(readFileSync(join(repoRoot, rel)));
  }
  return hash.digest('hex').slice(0, 16);
}

function run(cmd, args, cwd, env = process.env) {
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(' ')} (in ${cwd}) failed with ${r.status ?? r.signal}:\n` +
      `${r.stdout ?? ''}\n${r.stderr ?? ''}`);
  }
  return r.stdout;
}

function build(dir) {
  mkdirSync(dir, { recursive: true });
  for (const rel of stagedPaths()) cpSync(join(repoRoot, rel), join(dir, rel), { recursive: true });
  // node-gyp evaluates binding.gyp's node-addon-api include through require(): give it the repo's modules.
  symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'), 'dir');
  // The package's own build:ts script (tsc, plus whatever it does to dist/ after).
  run('npm', ['run', '--silent', 'build:ts'], dir);
  run(process.execPath, [join(repoRoot, 'scripts', 'prebuild-linux.mjs'), '--cwd', dir], dir);
  // Pack what a user gets: --ignore-scripts because dist/ and prebuilds/ are already built.
  const out = run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], dir);
  const info = JSON.parse(out)[0];
  const tarball = join(dir, info.filename);
  writeFileSync(join(dir, 'pack.json'), JSON.stringify(info, null, 2));
  return tarball;
}

function lockIsStale(lock, timeoutMs) {
  try {
    const pid = Number(readFileSync(join(lock, 'pid'), 'utf8'));
    if (Number.isInteger(pid) && pid > 0) {
      try {
        process.kill(pid, 0);
      } catch (err) {
        if (err.code === 'ESRCH') return true;
      }
    }
    return Date.now() - statSync(lock).mtimeMs > timeoutMs;
  } catch {
    // No pid file yet (the owner is between mkdir and write) or the lock went away.
    return false;
  }
}

/** Removes cached builds (and leftovers of dead builders) older than an hour, except `keep`. */
function pruneCache(cacheRoot, keep) {
  for (const name of readdirSync(cacheRoot)) {
    if (name === keep || name.endsWith('.lock')) continue;
    const p = join(cacheRoot, name);
    try {
      if (Date.now() - statSync(p).mtimeMs > 3_600_000) rmSync(p, { recursive: true, force: true });
    } catch {
      // raced with another pruner
    }
  }
}

function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Returns the prepared package: { dir, tarball, files } where dir is the staging copy (with dist/,
 * prebuilds/ and build/), tarball the `npm pack` output and files the tarball's file list.
 * @param {{ timeoutMs?: number }} [options]
 */
function preparePackage(options = {}) {
  const timeoutMs = options.timeoutMs ?? 300_000;
  const cacheRoot = join(tmpdir(), 'gpugate-prepared-package');
  mkdirSync(cacheRoot, { recursive: true });
  const key = stagingKey();
  const dir = join(cacheRoot, key);
  const done = join(dir, 'pack.json');
  const lock = join(cacheRoot, `${key}.lock`);
  const started = Date.now();
  for (;;) {
    if (existsSync(done)) break;
    let haveLock = false;
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, 'pid'), String(process.pid));
      haveLock = true;
    } catch {
      // Someone else is building; break the lock of a builder that died (killed test worker).
      if (lockIsStale(lock, timeoutMs)) rmSync(lock, { recursive: true, force: true });
    }
    if (haveLock) {
      try {
        if (!existsSync(done)) {
          const tmp = `${dir}.tmp-${process.pid}`;
          rmSync(tmp, { recursive: true, force: true });
          try {
            build(tmp);
          } catch (err) {
            rmSync(tmp, { recursive: true, force: true });
            throw err;
          }
          rmSync(dir, { recursive: true, force: true });
          renameSync(tmp, dir);
          // The pack file name stays valid; the staging copy moved with its tarball.
        }
      } finally {
        rmSync(lock, { recursive: true, force: true });
      }
      break;
    }
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${lock}`);
    sleep(500);
  }
  pruneCache(cacheRoot, key);
  const info = JSON.parse(readFileSync(done, 'utf8'));
  return { dir, tarball: join(dir, info.filename), files: info.files.map((f) => f.path) };
}

module.exports = { repoRoot, stagedPaths, stagingKey, preparePackage };

/** Builds (or reuses) the prepared package and prints where it is. */
if (require.main === module) {
  const p = preparePackage();
  console.log(JSON.stringify({ dir: p.dir, tarball: p.tarball, files: p.files.length }, null, 2));
  console.log(relative(process.cwd(), p.tarball));
}
