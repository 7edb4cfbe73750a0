/**
 * The tarball rules of scripts/pack-check.cjs, on file lists: a complete list passes, and each
 * violation the pack smoke test must catch (build output, tests, no prebuild, no simulator next to
 * it, no sources to build from) is reported by name.
 */
import { describe, expect, it } from 'vitest';
import { checkPackFiles } from '../scripts/pack-check.cjs';

const GOOD = [
  'package.json', 'README.md', 'LICENSE', 'binding.gyp', 'CMakeLists.txt',
  'dist/index.js', 'dist/index.d.ts', 'dist/index.mjs', 'dist/index.d.mts', 'dist/cli/main.js',
  'native/nvml_abi.h', 'native/addon.cc', 'sim/runtime.cc',
  'prebuilds/linux-x64/gpugate.glibc.node', 'prebuilds/linux-x64/gpugate_sim.so',
  'scenarios/idle-8x-rtx-pro-6000.json', 'schemas/gate.schema.json', 'contrib/systemd/vllm.service',
  'scripts/gpu-validate.sh', 'scripts/gpu-validate/report.cjs',
];

describe('pack-check rules', () => {
  it('accepts a complete package', () => {
    expect(checkPackFiles(GOOD)).toEqual([]);
  });

  it('rejects a package without the host validation script', () => {
    const problems = checkPackFiles(GOOD.filter((f) => f !== 'scripts/gpu-validate.sh'));
    expect(problems.join('\n')).toContain('scripts/gpu-validate.sh');
  });

  it('rejects build output', () => {
    expect(checkPackFiles([...GOOD, 'build/Release/gpugate.node'])).toEqual([
      expect.stringContaining('contains build output (build/): build/Release/gpugate.node'),
    ]);
  });

  it('rejects tests, wherever they are', () => {
    const problems = checkPackFiles([...GOOD, 'test/pack.test.ts', 'dist/foo.test.js']);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain('contains tests: test/pack.test.ts, dist/foo.test.js');
  });

  it('rejects a package without a prebuilt addon, or without the simulator next to it', () => {
    expect(checkPackFiles(GOOD.filter((f) => !f.endsWith('.node')))).toEqual([
      expect.stringContaining('missing a prebuilt N-API addon for linux-x64'),
    ]);
    expect(checkPackFiles(GOOD.filter((f) => !f.endsWith('gpugate_sim.so')))).toEqual([
      expect.stringContaining('missing the simulator library next to the prebuilt addon'),
    ]);
  });

  it('rejects a package without the JSON Schemas of the --json documents', () => {
    expect(checkPackFiles(GOOD.filter((f) => !f.startsWith('schemas/')))).toEqual([
      expect.stringContaining('missing the JSON Schemas of the --json documents'),
    ]);
  });

  it('rejects a package that cannot be built from source or loaded as ESM', () => {
    const problems = checkPackFiles(GOOD.filter((f) => !/^(native|sim)\/.*\.cc$|^binding\.gyp$|index\.mjs$/.test(f)));
    expect(problems).toEqual(expect.arrayContaining([
      'missing binding.gyp', 'missing dist/index.mjs',
      expect.stringContaining('missing the addon C++ sources'), expect.stringContaining('missing the simulator C++ sources'),
    ]));
  });

  it('rejects TypeScript sources, node_modules and tarballs', () => {
    const problems = checkPackFiles([...GOOD, 'src/index.ts', 'node_modules/x/index.js', 'gpugate-0.1.0.tgz']);
    expect(problems).toHaveLength(3);
  });
});
