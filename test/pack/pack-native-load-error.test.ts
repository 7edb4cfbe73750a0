/**
 * When no native binary matches, loading gpugate fails with a NativeLoadError that names the
 * platform, arch, libc, Node and N-API versions and every place searched; any other load failure
 * (a binary that is there but cannot be loaded) reaches the caller unchanged. Real node-gyp-build
 * lookups against real directories in a temp dir.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadNativeAddon } from '../../src/nvml/load-native-addon';
import { NativeLoadError, REQUIRED_NAPI_VERSION, describeNativeRuntime, explainNativeLoadFailure } from '../../src/nvml/native-load-error';

let dir: string;
const savedEnv = { prebuild: process.env['GPUGATE_PREBUILD'] };

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpugate-load-'));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'gpugate', version: '0.0.0' }));
  delete process.env['GPUGATE_PREBUILD'];
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
  if (savedEnv.prebuild === undefined) delete process.env['GPUGATE_PREBUILD'];
  else process.env['GPUGATE_PREBUILD'] = savedEnv.prebuild;
});

function loadError(root: string): unknown {
  try {
    loadNativeAddon(root);
  } catch (err) {
    return err;
  }
  throw new Error('loadNativeAddon did not throw');
}

describe('no matching binary', () => {
  it('throws NativeLoadError naming platform, arch, libc, Node and N-API versions and every place searched', () => {
    mkdirSync(join(dir, 'prebuilds', 'darwin-arm64'), { recursive: true });
    writeFileSync(join(dir, 'prebuilds', 'darwin-arm64', 'gpugate.node'), '');
    const err = loadError(dir);
    expect(err).toBeInstanceOf(NativeLoadError);
    const e = err as NativeLoadError;
    expect(e.code).toBe('GPUGATE_NO_NATIVE_BUILD');
    expect(e.message).toContain(`platform ${process.platform}, arch ${process.arch}`);
    expect(e.message).toMatch(/libc (glibc \d+\.\d+|musl)/);
    expect(e.message).toContain(`Node ${process.versions.node}`);
    expect(e.message).toContain(`N-API ${process.versions.napi}`);
    expect(e.message).toContain(`needs N-API ${REQUIRED_NAPI_VERSION} or newer`);
    const tuple = `${process.platform}-${process.arch}`;
    for (const place of [join(dir, 'build/Release'), join(dir, 'build/Debug'), join(dir, 'prebuilds', tuple),
      join(dirname(process.execPath), 'prebuilds', tuple)]) {
      expect(e.message).toContain(place);
      expect(e.searched.map((s) => s.dir)).toContain(place);
    }
    expect(e.message).toContain('prebuilds exist for: darwin-arm64');
    expect((e.cause as Error).message).toMatch(/^No native build was found/);
    expect(e.runtime).toEqual(describeNativeRuntime());
  });

  it('says what each place held: an empty build/Release, a prebuild directory without a binary', () => {
    mkdirSync(join(dir, 'build', 'Release'), { recursive: true });
    mkdirSync(join(dir, 'prebuilds', `${process.platform}-${process.arch}`), { recursive: true });
    const e = loadError(dir) as NativeLoadError;
    expect(e).toBeInstanceOf(NativeLoadError);
    const found = Object.fromEntries(e.searched.map((s) => [s.dir, s.found]));
    expect(found[join(dir, 'build/Release')]).toBe('no *.node file');
    expect(found[join(dir, 'build/Debug')]).toBe('no such directory');
    expect(found[join(dir, 'prebuilds', `${process.platform}-${process.arch}`)]).toBe('no *.node file');
  });

  it('searches GPUGATE_PREBUILD instead of the package root when it is set', () => {
    const other = join(dir, 'elsewhere');
    mkdirSync(other);
    process.env['GPUGATE_PREBUILD'] = other;
    const e = loadError(dir) as NativeLoadError;
    expect(e).toBeInstanceOf(NativeLoadError);
    expect(e.searched[0]?.dir).toBe(join(other, 'build/Release'));
  });
});

describe('other load failures', () => {
  it('pass a binary that exists but cannot be loaded through unchanged (the dlopen error)', () => {
    mkdirSync(join(dir, 'build', 'Release'), { recursive: true });
    const bogus = join(dir, 'build', 'Release', 'gpugate.node');
    writeFileSync(bogus, 'this is not an ELF file, it is long enough to have a header though........');
    const err = loadError(dir);
    expect(err).not.toBeInstanceOf(NativeLoadError);
    expect((err as Error).message).toContain(resolve(bogus));
    expect((err as Error).message).toMatch(/invalid ELF header|file too short/);
  });

  it('explainNativeLoadFailure returns any other error as the same object', () => {
    const original = new Error('undefined symbol: napi_something');
    expect(explainNativeLoadFailure(original, dir)).toBe(original);
    const notAnError = { weird: true };
    expect(explainNativeLoadFailure(notAnError, dir)).toBe(notAnError);
  });
});
