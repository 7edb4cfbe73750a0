/**
 * nvmlHelperPath(): the helper's file beside the addon binary the loader takes, over prepared
 * package folders: the local build's build/Release, else the prebuild folder node-gyp-build picks,
 * else none (nothing to compare a process's executable with).
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { arch, platform } from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { NVML_HELPER_NAME, nvmlHelperPath } from '../../src/nvml/helper-path';
import { makeTestTempDir } from '../helpers/temp-root';

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

function packageRoot(files: string[]): string {
  const root = makeTestTempDir('gpugate-helper-path-');
  roots.push(root);
  writeFileSync(path.join(root, 'package.json'), JSON.stringify({ name: 'gpugate-helper-path-test' }));
  for (const file of files) {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), '');
  }
  return root;
}

describe('nvmlHelperPath', () => {
  it('is beside the local build when there is one, even with a prebuild shipped', () => {
    const root = packageRoot(['build/Release/gpugate.node', `prebuilds/${platform()}-${arch()}/node.napi.node`]);
    expect(nvmlHelperPath(root)).toBe(path.join(root, 'build', 'Release', NVML_HELPER_NAME));
  });

  it('is beside the prebuilt addon when there is no local build', () => {
    const root = packageRoot([`prebuilds/${platform()}-${arch()}/node.napi.node`]);
    expect(nvmlHelperPath(root)).toBe(path.join(root, 'prebuilds', `${platform()}-${arch()}`, NVML_HELPER_NAME));
  });

  it('is null when no addon binary is there', () => {
    expect(nvmlHelperPath(packageRoot([]))).toBeNull();
  });

  it('is beside this package\'s own addon by default', () => {
    expect(nvmlHelperPath()).toBe(path.resolve(__dirname, '..', '..', 'build', 'Release', NVML_HELPER_NAME));
  });
});
