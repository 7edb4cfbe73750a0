// prepared-package.cjs: packs gpugate exactly as a release does, away from the working tree, for
// the pack smoke test and the multi-Node test (and by hand: `node scripts/prepared-package.cjs`).
//
// It copies what a clean clone holds for packing (package.json's `files`, the TypeScript sources
// and configs, the lock file, the prebuild script; never build/, prebuilds/, dist/) into a staging
// directory and runs a plain `npm pack` there: the package's own `prepack` (prebuildify) and
// `prepare` (tsc) scripts build what the tarball carries, as they do for a release.
//
// The result is cached under the OS temp directory, keyed by a hash of every staged file and the
// Node version, so that test files and worktrees with the same sources build it once. The cache is
// shared by every clone on the host and used concurrently, so:
// - a cached entry is self-contained: during the build node_modules links to the clone's modules
//   (node-gyp, prebuildify, tsc), and before it is published that link is replaced by copies of the
//   package's runtime dependencies; nothing in it points into a clone that may be deleted later;
// - an entry is built in a private directory and published with one rename; an entry, once
//   published, is never replaced or changed, only checked on every use (a damaged or incomplete one
//   is moved aside and rebuilt);
// - the lock only saves duplicate builds: correctness never depends on it;
// - entries unused for a day are removed (each use touches the entry's `last-used` file).

'use strict';

const { spawnSync } = require('node:child_process');
const { createHash, randomBytes } = require('node:crypto');
const {
  cpSync, existsSync, linkSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync,
  symlinkSync, unlinkSync, utimesSync, writeFileSync,
} = require('node:fs');
const { tmpdir } = require('node:os');
const { dirname, join, relative, resolve } = require('node:path');

const repoRoot = resolve(__dirname, '..');

/** Build outputs never staged from the working tree: the pack lifecycle produces them in the staging copy. */
const NEVER_STAGED = new Set(['build', 'prebuilds', 'dist', 'node_modules']);

/** Besides package.json's `files`: what `npm pack`'s lifecycle scripts read in a clean clone. */
const PACK_INPUTS = ['package.json', 'package-lock.json', 'src', 'tsconfig.json', 'tsconfig.build.json', 'scripts/prebuild-linux.mjs', 'scripts/build-ts.mjs', 'scripts/bundle-cli.mjs'];

/** Unused entries older than this are removed. */
const PRUNE_AFTER_MS = 24 * 3_600_000;

/** The repository paths that go into the staging copy. */
function stagedPaths() {
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
  const paths = new Set(PACK_INPUTS);
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

/** The package's runtime dependencies and theirs, as directories of the clone's node_modules. */
function runtimeDependencyDirs() {
  const found = new Map();
  const visit = (name, fromDir) => {
    if (found.has(name)) return;
    const manifest = require.resolve(`${name}/package.json`, { paths: [fromDir] });
    const dir = dirname(manifest);
    found.set(name, dir);
    const deps = JSON.parse(readFileSync(manifest, 'utf8')).dependencies ?? {};
    for (const dep of Object.keys(deps)) visit(dep, dir);
  };
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
  for (const dep of Object.keys(pkg.dependencies ?? {})) visit(dep, repoRoot);
  return found;
}

function build(dir) {
  mkdirSync(dir, { recursive: true });
  for (const rel of stagedPaths()) {
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    cpSync(join(repoRoot, rel), join(dir, rel), { recursive: true });
  }
  // The lifecycle scripts need the clone's tools (tsc, node-gyp, prebuildify): link them for the build only.
  const modules = join(dir, 'node_modules');
  symlinkSync(join(repoRoot, 'node_modules'), modules, 'dir');
  // What a release runs: prepack builds prebuilds/ with prebuildify, prepare compiles dist/.
  const out = run('npm', ['pack', '--json', '--foreground-scripts', '--pack-destination', dir], dir,
    { ...process.env, npm_config_ignore_scripts: 'false' });
  // The scripts' own output (the compiler's) comes first on stdout; npm's JSON starts at a line "[".
  const start = out.search(/^\[$/m);
  if (start === -1) throw new Error(`npm pack printed no JSON in ${dir}:\n${out}`);
  const info = JSON.parse(out.slice(start))[0];
  // From here on the entry must not point into the clone: keep copies of the runtime dependencies
  // (the multi-Node test loads node-gyp-build from the staging copy).
  unlinkSync(modules);
  mkdirSync(modules);
  for (const [name, from] of runtimeDependencyDirs()) {
    cpSync(from, join(modules, name), { recursive: true, dereference: true });
  }
  writeFileSync(join(dir, 'pack.json'), JSON.stringify(info, null, 2));
  writeFileSync(join(dir, 'last-used'), '');
}

/** Why a cached entry cannot be used, or null when it is complete and self-contained. */
function entryProblem(dir) {
  let info;
  try {
    info = JSON.parse(readFileSync(join(dir, 'pack.json'), 'utf8'));
  } catch {
    return 'no pack.json';
  }
  try {
    if (statSync(join(dir, info.filename)).size !== info.size) return `${info.filename} has the wrong size`;
  } catch {
    return `no ${info.filename}`;
  }
  const modules = join(dir, 'node_modules');
  try {
    if (lstatSync(modules).isSymbolicLink()) return 'node_modules is a link (into a clone)';
  } catch {
    return 'no node_modules';
  }
  for (const name of runtimeDependencyDirs().keys()) {
    if (!existsSync(join(modules, name, 'package.json'))) return `node_modules lacks ${name}`;
  }
  for (const f of info.files) {
    if (/^prebuilds\//.test(f.path) && !existsSync(join(dir, f.path))) return `no ${f.path}`;
  }
  return null;
}

function pidAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code !== 'ESRCH';
  }
}

/** Moves a path aside under a unique name and removes it (another process may do the same). */
function discard(path) {
  const trash = `${path}.trash-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    renameSync(path, trash);
  } catch {
    return; // already moved by someone else
  }
  rmSync(trash, { recursive: true, force: true });
}

/** Removes entries unused for a day, and leftovers of builders that died. */
function pruneCache(cacheRoot, keep) {
  for (const name of readdirSync(cacheRoot)) {
    if (name === keep || name.startsWith(`${keep}.`)) continue;
    const p = join(cacheRoot, name);
    try {
      const builder = /\.(tmp|lock)-(\d+)-/.exec(name);
      if (builder !== null) {
        if (!pidAlive(Number(builder[2]))) rmSync(p, { recursive: true, force: true });
        continue;
      }
      if (/\.trash-/.test(name)) continue;
      const used = existsSync(join(p, 'last-used')) ? statSync(join(p, 'last-used')).mtimeMs : statSync(p).mtimeMs;
      if (Date.now() - used > PRUNE_AFTER_MS) discard(p);
    } catch {
      // raced with another pruner
    }
  }
}

function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Holds the key's build lock while `fn` runs, or returns false when a live builder holds it. */
function withBuildLock(cacheRoot, key, fn) {
  const lock = join(cacheRoot, `${key}.lock`);
  const mine = join(cacheRoot, `${key}.lock-${process.pid}-${randomBytes(4).toString('hex')}`);
  writeFileSync(mine, String(process.pid));
  try {
    try {
      // A hard link is created atomically or not at all: its content names the owner.
      linkSync(mine, lock);
    } catch {
      let owner = 0;
      try {
        owner = Number(readFileSync(lock, 'utf8'));
      } catch {
        return false; // released meanwhile: try again
      }
      if (Number.isInteger(owner) && owner > 0 && pidAlive(owner)) return false;
      discard(lock); // its builder died; whoever wins the next link builds
      return false;
    }
    try {
      fn();
    } finally {
      rmSync(lock, { force: true });
    }
    return true;
  } finally {
    rmSync(mine, { force: true });
  }
}

/**
 * Returns the prepared package: { dir, tarball, files } where dir is the staging copy (with dist/,
 * prebuilds/, build/ and the runtime dependencies), tarball the `npm pack` output and files the
 * tarball's file list.
 * @param {{ timeoutMs?: number }} [options]
 */
function preparePackage(options = {}) {
  const timeoutMs = options.timeoutMs ?? 600_000;
  const cacheRoot = join(tmpdir(), 'gpugate-prepared-package');
  mkdirSync(cacheRoot, { recursive: true });
  const key = stagingKey();
  const dir = join(cacheRoot, key);
  const started = Date.now();
  for (;;) {
    if (existsSync(dir)) {
      const problem = entryProblem(dir);
      if (problem === null) break;
      console.error(`prepared-package: discarding the cached ${dir}: ${problem}`);
      discard(dir);
    }
    const built = withBuildLock(cacheRoot, key, () => {
      if (existsSync(dir) && entryProblem(dir) === null) return;
      const tmp = `${dir}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
      try {
        build(tmp);
        // Publish: one rename. Should another builder have won, its entry is as good as ours.
        try {
          renameSync(tmp, dir);
        } catch (err) {
          if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
        }
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    });
    if (built) {
      const problem = entryProblem(dir);
      if (problem !== null) throw new Error(`the package prepared in ${dir} is unusable: ${problem}`);
      break;
    }
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for another process building ${dir}`);
    sleep(500);
  }
  const now = new Date();
  try {
    utimesSync(join(dir, 'last-used'), now, now);
  } catch {
    // an entry from an older version of this script: pruned by directory age
  }
  pruneCache(cacheRoot, key);
  const info = JSON.parse(readFileSync(join(dir, 'pack.json'), 'utf8'));
  return { dir, tarball: join(dir, info.filename), files: info.files.map((f) => f.path) };
}

module.exports = { repoRoot, stagedPaths, stagingKey, preparePackage, entryProblem };

/** Builds (or reuses) the prepared package and prints where it is. */
if (require.main === module) {
  const p = preparePackage();
  console.log(JSON.stringify({ dir: p.dir, tarball: p.tarball, files: p.files.length }, null, 2));
  console.log(relative(process.cwd(), p.tarball));
}
