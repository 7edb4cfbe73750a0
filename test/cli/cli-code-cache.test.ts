/**
 * The bundled CLI's V8 code cache (src/cli/code-cache.ts): made by the build, only ever read, and
 * read only when it can be trusted. Real files in a scratch copy of the built bundle: a cache
 * owned by another uid (chown to 65534), writable by its group or by others, or reached through
 * a symlink is refused; one V8 rejects is ignored; the command started for real writes nothing.
 */
import { chmodSync, chownSync, copyFileSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BUNDLE_FILE, CACHE_FILE, compileBundle, trustedCacheData } from '../../src/cli/code-cache';
import { cliEnv, runCli } from '../helpers/cli';
import { repoRoot, simDevice, testTempDir, writeScenario } from '../helpers/sim';

const builtCli = path.join(repoRoot(), 'dist', 'cli');
const NOBODY = 65534;

let dir: string;
let cache: string;

beforeEach(() => {
  dir = mkdtempSync(path.join(testTempDir(), 'code-cache-'));
  copyFileSync(path.join(builtCli, BUNDLE_FILE), path.join(dir, BUNDLE_FILE));
  cache = path.join(dir, CACHE_FILE);
  copyFileSync(path.join(builtCli, CACHE_FILE), cache);
  chmodSync(cache, 0o644);
});

afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('the code cache of the bundled CLI', () => {
  it('is used when owned by root (or the euid) and writable by no one else: V8 accepts the build\'s cache', () => {
    expect(statSync(cache).uid).toBe(process.geteuid?.());
    expect(compileBundle(dir).cache).toBe('used');
  });

  it('is refused when another uid owns it', () => {
    chownSync(cache, NOBODY, NOBODY);
    expect(trustedCacheData(cache)).toEqual({ refused: `${cache} is owned by uid ${NOBODY}, neither root nor uid ${process.geteuid?.()}` });
    expect(compileBundle(dir).cache).toBe('refused');
  });

  it.each([0o664, 0o646, 0o666])('is refused when writable by its group or by others (mode %o)', (mode) => {
    chmodSync(cache, mode);
    expect(trustedCacheData(cache)).toEqual({ refused: expect.stringContaining(`writable by its group or by others (mode ${mode.toString(8)})`) });
    expect(compileBundle(dir).cache).toBe('refused');
  });

  it('is refused when it is a symlink, even to a good cache (no symlink is followed)', () => {
    const real = path.join(dir, 'elsewhere.v8-cache');
    copyFileSync(cache, real);
    rmSync(cache);
    symlinkSync(real, cache);
    expect(trustedCacheData(cache)).toEqual({ refused: `${cache}: ELOOP` });
    expect(compileBundle(dir).cache).toBe('refused');
  });

  it('is absent without complaint: the bundle is compiled from source', () => {
    rmSync(cache);
    expect(trustedCacheData(cache)).toBeNull();
    expect(compileBundle(dir).cache).toBe('none');
  });

  it('is ignored when V8 rejects it (made from another source, or by another Node)', () => {
    writeFileSync(cache, Buffer.alloc(4096, 7), { mode: 0o644 });
    const compiled = compileBundle(dir);
    expect(compiled.cache).toBe('rejected');
    // Compiled from source all the same: the wrapper function is there to run.
    expect(typeof compiled.script.runInThisContext()).toBe('function');
  });
});

describe('a real gpugate start', () => {
  it('reads the cache and writes nothing: not beside the bundle, not in TMPDIR or HOME', async () => {
    const scratch = mkdtempSync(path.join(testTempDir(), 'code-cache-home-'));
    try {
      const before = readdirSync(builtCli).map((name) => [name, statSync(path.join(builtCli, name)).mtimeMs] as const);
      const run = await runCli(['check'], { env: cliEnv(writeScenario({ devices: [simDevice(0)] }), { TMPDIR: scratch, HOME: scratch }) });
      expect(run.code).toBe(0);
      expect(readdirSync(builtCli).map((name) => [name, statSync(path.join(builtCli, name)).mtimeMs] as const)).toEqual(before);
      expect(readdirSync(scratch)).toEqual([]);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});
