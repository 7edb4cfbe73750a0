/**
 * What the built `gpugate check` loads and runs: two files of the package (the loader
 * dist/cli/main.js and the bundle dist/cli/gpugate-cli.js), and in the bundle only the code a
 * plain check runs (issue 23 item 9), so its start-up stays close to a bare `node`. V8's own
 * coverage (NODE_V8_COVERAGE, written as the process exits) says which scripts were compiled
 * and, per function, how often it ran: in the bundle each module that loads on demand is one
 * initialiser function named by its source path (src/gate/reap.ts …), run once when the module
 * is first needed. The assertions are about what ran, never about time (the start-up ratio
 * itself is measured by `npm run bench`).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { cliEnv, runCli } from '../helpers/cli';
import { repoRoot, simDevice, testTempDir, writeScenario } from '../helpers/sim';

const twoIdleGpus = writeScenario({ devices: [simDevice(0), simDevice(1)] });
const probeDir = mkdtempSync(path.join(testTempDir(), 'module-probe-'));

afterAll(() => rmSync(probeDir, { recursive: true, force: true }));

/** Modules a plain `check` never needs: each is for a flag or a failure `check` did not have. */
const NOT_FOR_A_PLAIN_CHECK = ['gate/reap', 'host/shm', 'cli/json-result', 'cli/run-wrapped', 'cli/report-file', 'cli/status-notifier'];

const dist = pathToFileURL(path.join(repoRoot(), 'dist')).href;
const bundleUrl = `${dist}/cli/gpugate-cli.js`;

interface V8Coverage {
  result: Array<{ url: string; functions: Array<{ functionName: string; ranges: Array<{ count: number }> }> }>;
}

let runs = 0;

/**
 * Run the real CLI under V8 coverage; resolves to its exit code, the package files it compiled
 * (relative to dist/) and, for each on-demand module of the bundle (as `gate/reap`), whether it ran.
 */
async function loadedBy(args: readonly string[]): Promise<{ code: number | null; files: string[]; modules: Map<string, boolean> }> {
  runs += 1;
  const coverageDir = path.join(probeDir, `coverage-${runs}`);
  const run = await runCli(args, { env: cliEnv(twoIdleGpus, { NODE_V8_COVERAGE: coverageDir }) });
  const scripts = readdirSync(coverageDir).flatMap((name) => (JSON.parse(readFileSync(path.join(coverageDir, name), 'utf8')) as V8Coverage).result);
  const files = scripts.filter((script) => script.url.startsWith(`${dist}/`)).map((script) => script.url.slice(dist.length + 1));
  const modules = new Map<string, boolean>();
  for (const fn of scripts.find((script) => script.url === bundleUrl)?.functions ?? []) {
    const source = /^src\/(.+)\.ts$/.exec(fn.functionName);
    if (source?.[1] !== undefined) modules.set(source[1], (fn.ranges[0]?.count ?? 0) > 0);
  }
  return { code: run.code, files, modules };
}

/** Whether the bundle's on-demand module `name` ran; a module that is not on demand fails the test. */
function ran(modules: Map<string, boolean>, name: string): boolean {
  const state = modules.get(name);
  if (state === undefined) throw new Error(`${name} is not an on-demand module of the bundle (its code runs at every start)`);
  return state;
}

describe('gpugate check start-up', () => {
  it('compiles two files of the package, the loader and the bundle', async () => {
    const { code, files } = await loadedBy(['check']);
    expect(code).toBe(0);
    expect(files.sort()).toEqual(['cli/gpugate-cli.js', 'cli/main.js']);
  });

  it('uses each Node built-in module as it is, without copying its properties per importing module (esbuild\'s __toESM)', () => {
    const bundle = readFileSync(path.join(repoRoot(), 'dist', 'cli', 'gpugate-cli.js'), 'latin1');
    expect(bundle).toContain('require("node:path")');
    expect(bundle).not.toMatch(/__toESM\(require\("node:/);
  });

  it('runs the check command and the gate, and nothing a plain check does not use', async () => {
    const { code, modules } = await loadedBy(['check']);
    expect(code).toBe(0);
    // The probe sees what ran: the command and the gate are there.
    expect(ran(modules, 'cli/commands/check-command')).toBe(true);
    expect(ran(modules, 'gate/gate')).toBe(true);
    for (const name of NOT_FOR_A_PLAIN_CHECK) expect(ran(modules, name), name).toBe(false);
    for (const command of ['wait', 'select', 'status', 'holders', 'doctor', 'demo', 'sim', 'bench', 'systemd', 'completion']) {
      expect(ran(modules, `cli/commands/${command}-command`), command).toBe(false);
    }
  });

  it('runs the --json result code only when --json asks for it', async () => {
    const { code, modules } = await loadedBy(['check', '--json']);
    expect(code).toBe(0);
    expect(ran(modules, 'cli/json-result')).toBe(true);
    expect(ran(modules, 'cli/run-wrapped')).toBe(false);
  });

  it('runs the /dev/shm code (by import()) when the stale scan runs: --stale fail', async () => {
    const { code, modules } = await loadedBy(['check', '--stale', 'fail']);
    expect(code).toBe(0);
    expect(ran(modules, 'host/shm')).toBe(true);
    expect(ran(modules, 'gate/reap')).toBe(false);
  });
});
