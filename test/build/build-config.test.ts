/**
 * The two native builds cannot drift apart: binding.gyp is strict JSON and the single source of
 * truth, CMakeLists.txt builds exactly its targets from exactly its sources with its defines (checked
 * through CMake's compile_commands.json, configure only: nothing is compiled here), links every object
 * of a static library into each target that depends on it and nothing but those, both install each
 * simulator library under the driver's file name through the same script, the sanitizer option adds
 * ASan + UBSan, an unknown gyp key stops the CMake configure with a message naming it, and
 * package.json's binary.napi_versions agrees with the NAPI_VERSION define. The entry points
 * package.json names are the ones the TypeScript build makes, and they load.
 */
import { execFile, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { REQUIRED_NAPI_VERSION } from '../../src/nvml/native-load-error';

const root = resolve(__dirname, '..', '..');
const requireFromRoot = createRequire(join(root, 'package.json'));

interface GypAction {
  action_name: string;
  inputs: string[];
  outputs: string[];
  action: string[];
}
interface GypTarget {
  target_name: string;
  type?: string;
  sources?: string[];
  defines?: string[];
  dependencies?: string[];
  actions?: GypAction[];
}
interface Gyp {
  variables?: Record<string, string | string[]>;
  target_defaults?: { defines?: string[] };
  targets: GypTarget[];
}
interface CompileCommand {
  file: string;
  /** The compiler command line; its `-o CMakeFiles/<target>.dir/...` names the target. */
  command: string;
}

const gypText = readFileSync(join(root, 'binding.gyp'), 'utf8');
const temps: string[] = [];

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'gpugate-cmake-'));
  temps.push(d);
  return d;
}

/** The node-addon-api and Node-API header directories, as cmake-js passes them in CMAKE_JS_INC. */
function cmakeJsInc(): string {
  const napi = (requireFromRoot('node-addon-api') as { include_dir: string }).include_dir;
  const headers = (requireFromRoot('node-api-headers') as { include_dir: string }).include_dir;
  return `${join(root, napi)};${headers}`;
}

function configure(sourceDir: string, extra: string[] = []): { status: number | null; output: string; buildDir: string } {
  const buildDir = tempDir();
  const r = spawnSync('cmake', ['-S', sourceDir, '-B', buildDir, '-G', 'Unix Makefiles',
    '-DCMAKE_EXPORT_COMPILE_COMMANDS=ON', `-DCMAKE_JS_INC=${cmakeJsInc()}`, ...extra], { encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, output: `${r.stdout}\n${r.stderr}`, buildDir };
}

function compileCommands(buildDir: string): CompileCommand[] {
  return JSON.parse(readFileSync(join(buildDir, 'compile_commands.json'), 'utf8')) as CompileCommand[];
}

/** gyp's <(var) expansion for the top-level variables. */
function expand(value: string, gyp: Gyp): string {
  return value.replace(/<\((\w+)\)/g, (_, name: string) => {
    const v = gyp.variables?.[name];
    return typeof v === 'string' ? v : `<(${name})`;
  });
}

/** A target's sources, with gyp's <@(list) items spliced in from the top-level variables. */
function sourcesOf(target: GypTarget, gyp: Gyp): string[] {
  return (target.sources ?? []).flatMap((s) => {
    const list = /^<@\((\w+)\)$/.exec(s);
    const v = list === null ? undefined : gyp.variables?.[list[1]!];
    return Array.isArray(v) ? v : [s];
  });
}

afterAll(() => {
  for (const d of temps) rmSync(d, { recursive: true, force: true });
});

describe('binding.gyp and package.json', () => {
  it('binding.gyp is strict JSON (JSON.parse and CMake string(JSON) read it)', () => {
    expect(() => JSON.parse(gypText) as unknown).not.toThrow();
  });

  it('package.json binary.napi_versions, the NAPI_VERSION define and the load error agree', () => {
    const gyp = JSON.parse(gypText) as Gyp;
    const define = (gyp.target_defaults?.defines ?? []).map((d) => expand(d, gyp)).find((d) => d.startsWith('NAPI_VERSION='));
    expect(define).toBeDefined();
    const napi = Number(define?.split('=')[1]);
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { binary?: { napi_versions?: number[] } };
    expect(pkg.binary?.napi_versions).toEqual([napi]);
    expect(REQUIRED_NAPI_VERSION).toBe(napi);
  });

  it('package.json names entry points the TypeScript build makes, and CommonJS, ESM and the bin load from them', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      main: string; types: string; exports: Record<string, Record<string, Record<string, string>>>; bin: Record<string, string>;
      scripts: Record<string, string>;
    };
    const dot = pkg.exports['.']!;
    // "types" must come first in each condition block for TypeScript to use it.
    for (const condition of ['import', 'require']) expect(Object.keys(dot[condition] ?? {})[0], condition).toBe('types');
    for (const file of [pkg.main, pkg.types, dot['import']!['types']!, dot['require']!['types']!]) {
      expect(existsSync(join(root, file)), `${file} (run npm run build:ts)`).toBe(true);
    }
    const script = [
      `const cjs = require(${JSON.stringify(join(root, dot['require']!['default']!))});`,
      `import(${JSON.stringify(pathToFileURL(join(root, dot['import']!['default']!)).href)}).then((esm) => {`,
      "  const names = (m) => Object.keys(m).filter((k) => !['default', 'module.exports', '__esModule'].includes(k)).sort().join(',');",
      "  if (typeof cjs.openNvml !== 'function' || names(esm) !== names(cjs)) throw new Error(`ESM ${names(esm)} vs CommonJS ${names(cjs)}`);",
      "  process.stdout.write('same exports');",
      '});',
    ].join('\n');
    const loaded = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30_000 });
    expect(loaded.stderr).toBe('');
    expect(loaded.stdout).toBe('same exports');
    const bin = join(root, pkg.bin['gpugate']!);
    expect(readFileSync(bin, 'utf8').startsWith('#!/usr/bin/env -S node --disable-sigusr1\n')).toBe(true);
    const help = spawnSync(bin, ['--help'], { encoding: 'utf8', timeout: 30_000 });
    expect(help.status, help.stderr).toBe(0);
    expect(help.stdout).toContain('Usage: gpugate <command>');
    // npm would run a script named "prebuild" before every "build".
    expect(pkg.scripts['prebuild']).toBeUndefined();
  });
});

describe('CMakeLists.txt reads binding.gyp', () => {
  it('configures the same targets, from the same sources, with the same defines', () => {
    const gyp = JSON.parse(gypText) as Gyp;
    const { status, output, buildDir } = configure(root);
    expect(status, output).toBe(0);
    const built = gyp.targets.filter((t) => (t.type ?? 'loadable_module') !== 'none');
    expect(built.length).toBeGreaterThan(1);
    expect(output).toContain(`gpugate: targets from binding.gyp: ${built.map((t) => t.target_name).join(';')} ->`);
    const commands = compileCommands(buildDir);
    const common = (gyp.target_defaults?.defines ?? []).map((d) => expand(d, gyp));
    for (const target of built) {
      const own = commands.filter((c) => c.command.includes(`CMakeFiles/${target.target_name}.dir/`));
      expect(own.map((c) => c.file).sort(), target.target_name).toEqual(sourcesOf(target, gyp).map((s) => join(root, s)).sort());
      for (const c of own) {
        for (const d of [...common, ...(target.defines ?? [])].map((x) => expand(x, gyp))) {
          expect(c.command, `${target.target_name} ${c.file}`).toContain(`-D${d}`);
        }
        expect(c.command).not.toContain('-fsanitize');
      }
    }
    // Exactly the gyp sources are compiled: nothing listed twice, nothing extra.
    const allSources = built.flatMap((t) => sourcesOf(t, gyp).map((s) => `${t.target_name}:${join(root, s)}`));
    expect(commands.length).toBe(allSources.length);
  });

  it('both builds install every simulator profile under the driver\'s file name with the same script, and the build here did', () => {
    const gyp = JSON.parse(gypText) as Gyp;
    const table = requireFromRoot('./sim/profile-table.cjs') as {
      readProfileTable(): { profiles: Array<{ token: string }> };
      driverNamePaths(token: string): string[];
    };
    const actions = gyp.targets.flatMap((t) => t.actions ?? []);
    const profiles = gyp.targets.flatMap((t) => (t.defines ?? []).map((d) => /^GPUGATE_SIM_LIBRARY_PROFILE=(\w+)$/.exec(d)?.[1] ?? []).flat()
      .map((token) => ({ token, library: `${t.target_name}.so` })));
    // Every profile of the table has a library target, and binding.gyp installs each one.
    expect(profiles.map((p) => p.token).sort()).toEqual(table.readProfileTable().profiles.map((p) => p.token).sort());
    for (const { token, library } of profiles) {
      const install = actions.find((a) => a.action.includes('install') && a.action.includes(token));
      expect(install, token).toBeDefined();
      expect(install!.action).toEqual(['node', 'sim/profile-table.cjs', 'install', token, `<(PRODUCT_DIR)/${library}`, '<(PRODUCT_DIR)']);
      // node-gyp's make rule must name what the script writes, or a changed library would not be copied again.
      expect(install!.outputs.sort(), token).toEqual(table.driverNamePaths(token).map((p) => `<(PRODUCT_DIR)/${p}`).sort());
      for (const path of table.driverNamePaths(token)) {
        expect(readFileSync(join(root, 'build', 'Release', path)).equals(readFileSync(join(root, 'build', 'Release', library))), path).toBe(true);
      }
    }
    // The CMake build runs the same script after linking each library.
    const { status, output, buildDir } = configure(root);
    expect(status, output).toBe(0);
    for (const { token, library } of profiles) {
      const rules = readFileSync(join(buildDir, 'CMakeFiles', `${library.replace(/\.so$/, '')}.dir`, 'build.make'), 'utf8');
      expect(rules, token).toContain(`profile-table.cjs install ${token} ${join(buildDir, 'Release', library)} ${join(buildDir, 'Release')}`);
    }
  });

  // The sources are C++17. Node's own build settings ask for -std=gnu++17 (Node 22) or -std=gnu++20
  // (Node 24, after ours, so it won): binding.gyp removes both, because C++20's standard headers
  // cost a fresh clone's npm install about a third more compile time for nothing the sources use.
  it('both builds compile the C++ sources as C++17, whatever the Node they build against asks for', () => {
    const { status, output, buildDir } = configure(root);
    expect(status, output).toBe(0);
    const cxx = compileCommands(buildDir).filter((c) => c.file.endsWith('.cc'));
    expect(cxx.length).toBeGreaterThan(0);
    for (const c of cxx) expect(c.command.match(/-std=\S+/g)?.at(-1), c.file).toMatch(/^-std=(c|gnu)\+\+17$/);
    // The node-gyp build the checkout ran (npm install's, or build:native's): the last -std wins.
    const makefiles = ['gpugate', 'gpugate_nvml_core', 'gpugate-nvml-helper', 'gpugate_sim_core'].map((t) => join(root, 'build', `${t}.target.mk`));
    for (const file of makefiles) {
      const flags = /^CFLAGS_CC_Release :=((?:.*\\\n)*.*)$/m.exec(readFileSync(file, 'utf8'))?.[1] ?? '';
      expect(flags.match(/-std=\S+/g)?.at(-1), file).toBe('-std=c++17');
    }
  });

  it('compiles each static library once and links all of its objects into every target that depends on it', () => {
    const gyp = JSON.parse(gypText) as Gyp;
    const statics = gyp.targets.filter((t) => t.type === 'static_library');
    expect(statics.length).toBeGreaterThan(0);
    const { status, output, buildDir } = configure(root);
    expect(status, output).toBe(0);
    for (const target of gyp.targets.filter((t) => (t.dependencies ?? []).some((d) => statics.some((s) => s.target_name === d)))) {
      const link = readFileSync(join(buildDir, 'CMakeFiles', `${target.target_name}.dir`, 'link.txt'), 'utf8');
      for (const dependency of target.dependencies ?? []) {
        const library = statics.find((s) => s.target_name === dependency)!;
        for (const source of sourcesOf(library, gyp)) {
          // Every object by name (a shared simulator library must export every NVML function its sources define).
          expect(link, `${target.target_name} links ${source}`).toContain(`CMakeFiles/${dependency}.dir/${source}.o`);
        }
      }
    }
  });

  it('stops with a message when a target depends on something that is no static library of binding.gyp', () => {
    const src = tempDir();
    cpSync(join(root, 'CMakeLists.txt'), join(src, 'CMakeLists.txt'));
    writeFileSync(join(src, 'a.cc'), 'int a() { return 1; }\n');
    writeFileSync(join(src, 'binding.gyp'), JSON.stringify({
      targets: [{ target_name: 'x', type: 'executable', sources: ['a.cc'], dependencies: ['y'] }],
    }));
    const { status, output } = configure(src);
    expect(status).not.toBe(0);
    expect(output).toContain('target x depends on y, which is not a static_library');
  });

  it('-DGPUGATE_SANITIZE=ON compiles every source with ASan and UBSan', () => {
    const { status, output, buildDir } = configure(root, ['-DGPUGATE_SANITIZE=ON']);
    expect(status, output).toBe(0);
    expect(output).toContain('sanitizer build');
    const commands = compileCommands(buildDir);
    expect(commands.length).toBeGreaterThan(0);
    for (const c of commands) expect(c.command, c.file).toContain('-fsanitize=address,undefined');
  });

  it('stops with a message naming a gyp key it does not understand', () => {
    const src = tempDir();
    cpSync(join(root, 'CMakeLists.txt'), join(src, 'CMakeLists.txt'));
    writeFileSync(join(src, 'a.cc'), 'int a() { return 1; }\n');
    writeFileSync(join(src, 'binding.gyp'), JSON.stringify({
      targets: [{ target_name: 'x', type: 'shared_library', sources: ['a.cc'], frobnicate_flags: ['-O9'] }],
    }));
    const { status, output } = configure(src);
    expect(status).not.toBe(0);
    expect(output).toContain('frobnicate_flags');
  });

  it('stops with a message naming binding.gyp when it is not strict JSON', () => {
    const src = tempDir();
    cpSync(join(root, 'CMakeLists.txt'), join(src, 'CMakeLists.txt'));
    writeFileSync(join(src, 'binding.gyp'), "{ 'targets': [] }\n");
    const { status, output } = configure(src);
    expect(status).not.toBe(0);
    expect(output).toMatch(/binding\.gyp: expected a strict JSON object/);
  });
});

describe('the static libraries\' unity sources', () => {
  // binding.gyp compiles each static library as one unit (native/nvml_core.unity.cc and
  // sim/sim_core.unity.cc include its sources): a source that compiled only because one before it
  // had included a header would break the day the list is reordered, or the file reused alone.
  it('each source they include compiles on its own', async () => {
    const gyp = JSON.parse(gypText) as Gyp;
    const unities = gyp.targets.filter((t) => t.type === 'static_library').flatMap((t) => sourcesOf(t, gyp)).filter((s) => s.endsWith('.unity.cc'));
    expect(unities.length).toBeGreaterThan(0);
    const members = unities.flatMap((unity) =>
      [...readFileSync(join(root, unity), 'utf8').matchAll(/^#include "([^"]+\.cc)"$/gm)].map((m) => join(root, dirname(unity), m[1]!)));
    expect(members.length).toBeGreaterThan(unities.length);
    const defines = (gyp.target_defaults?.defines ?? []).map((d) => `-D${expand(d, gyp)}`);
    const compiler = process.env['CXX'] ?? 'c++';
    const failures: string[] = [];
    // Two at a time: the project's machines have two cores.
    const queue = [...members];
    await Promise.all([0, 1].map(async () => {
      for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
        const run = await execFileResult(compiler, ['-std=c++17', '-fsyntax-only', '-Wall', '-Wextra', ...defines, file]);
        if (run.code !== 0) failures.push(`${file}: ${run.output}`);
      }
    }));
    expect(failures).toEqual([]);
  }, 300_000);
});

function execFileResult(file: string, args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolvePromise) => {
    execFile(file, args, { cwd: root, encoding: 'utf8' }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
      resolvePromise({ code, output: `${stdout}${stderr}${error !== null && code === null ? error.message : ''}` });
    });
  });
}
