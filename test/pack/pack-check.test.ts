/**
 * The tarball rules of scripts/pack-check.cjs, on file lists: a complete list passes, and each
 * violation the pack smoke test must catch (build output, tests, no prebuild, no simulator next to
 * it, no sources to build from) is reported by name.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkDocLinks, checkPackFiles } from '../../scripts/pack-check.cjs';

const GOOD = [
  'package.json', 'README.md', 'LICENSE', 'binding.gyp', 'CMakeLists.txt',
  'dist/index.js', 'dist/index.d.ts', 'dist/index.mjs', 'dist/index.d.mts', 'dist/cli/main.js', 'dist/cli/gpugate-cli.js', 'dist/cli/gpugate-cli.v8-cache',
  'native/nvml_abi.h', 'native/addon.cc', 'native/helper/main.cc', 'sim/runtime.cc',
  'prebuilds/linux-x64/gpugate.glibc.node', 'prebuilds/linux-x64/gpugate_sim.so', 'prebuilds/linux-x64/gpugate-nvml-helper',
  'scenarios/idle-8x-rtx-pro-6000.json', 'schemas/gate.schema.json', 'contrib/systemd/vllm.service',
  'scripts/gpu-validate.sh', 'scripts/gpu-validate/report.cjs', 'docs/cli.md',
];

describe('pack-check rules', () => {
  it('accepts a complete package', () => {
    expect(checkPackFiles(GOOD)).toEqual([]);
  });

  it('rejects a package without the host validation script', () => {
    const problems = checkPackFiles(GOOD.filter((f) => f !== 'scripts/gpu-validate.sh'));
    expect(problems.join('\n')).toContain('scripts/gpu-validate.sh');
  });

  it('rejects a package without the bundled command or its code cache', () => {
    for (const file of ['dist/cli/main.js', 'dist/cli/gpugate-cli.js', 'dist/cli/gpugate-cli.v8-cache']) {
      expect(checkPackFiles(GOOD.filter((f) => f !== file)).join('\n'), file).toContain(file);
    }
  });

  it('rejects build output', () => {
    expect(checkPackFiles([...GOOD, 'build/Release/gpugate.node'])).toEqual([
      expect.stringContaining('contains build output (build/): build/Release/gpugate.node'),
    ]);
  });

  it('rejects tests, wherever they are', () => {
    const problems = checkPackFiles([...GOOD, 'test/pack/pack.test.ts', 'dist/foo.test.js']);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain('contains tests: test/pack/pack.test.ts, dist/foo.test.js');
  });

  it('rejects a package without a prebuilt addon, or without the simulator next to it', () => {
    expect(checkPackFiles(GOOD.filter((f) => !f.endsWith('.node')))).toEqual([
      expect.stringContaining('missing a prebuilt N-API addon for linux-x64'),
    ]);
    expect(checkPackFiles(GOOD.filter((f) => !f.endsWith('gpugate_sim.so')))).toEqual([
      expect.stringContaining('missing the simulator library next to the prebuilt addon'),
    ]);
  });

  it('rejects a package without the NVML helper beside the prebuilt addon, or without its sources', () => {
    expect(checkPackFiles(GOOD.filter((f) => !f.endsWith('gpugate-nvml-helper')))).toEqual([
      expect.stringContaining('missing the NVML helper next to the prebuilt addon'),
    ]);
    expect(checkPackFiles(GOOD.filter((f) => !f.startsWith('native/helper/')))).toEqual([
      expect.stringContaining('missing the NVML helper C++ sources'),
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

  it('rejects a package without the documentation README.md links to', () => {
    expect(checkPackFiles(GOOD.filter((f) => !f.startsWith('docs/')))).toEqual([
      expect.stringContaining('missing the documentation README.md links to'),
    ]);
  });
});

describe('links of the packed documentation', () => {
  const texts: Record<string, string> = {
    'README.md': 'See [the CLI](docs/cli.md), [its exit codes](docs/cli.md#exit-codes), [a site](https://example.org/x) and [here](#licence).\n## Licence\n',
    'docs/cli.md': '# gpugate CLI\n## Exit codes\n### `gpugate sim [--scenario FILE] [--started-at WHEN]`\nBack to [install](install.md) and [sim](#gpugate-sim---scenario-file---started-at-when).\n',
    'docs/install.md': '# Install\n',
  };
  const read = (file: string): string => texts[file] ?? '';

  it('accepts links that resolve to files and headings of the package', () => {
    expect(checkDocLinks(Object.keys(texts), read)).toEqual([]);
  });

  it('names a link to a file the package lacks, and an anchor that is no heading', () => {
    expect(checkDocLinks(['README.md', 'docs/cli.md'], read)).toEqual(['docs/cli.md links to install.md, which is not in the package']);
    const broken = { ...texts, 'README.md': 'See [gone](docs/cli.md#no-such-heading).\n' };
    expect(checkDocLinks(Object.keys(broken), (file) => broken[file as keyof typeof broken] ?? '')).toEqual([
      'README.md links to docs/cli.md#no-such-heading, but docs/cli.md has no heading #no-such-heading',
    ]);
  });

  it('finds every link of the repository\'s own README.md and docs/*.md in the files the package ships', () => {
    const root = join(__dirname, '..', '..');
    const shipped = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { files: string[] }).files;
    expect(shipped).toContain('docs');
    const files = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
    expect(checkDocLinks(files, (file) => readFileSync(join(root, file), 'utf8'))).toEqual([]);
  });
});
