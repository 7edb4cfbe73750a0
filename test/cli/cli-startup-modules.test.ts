/**
 * What the built `gpugate check` loads: only the code a plain check runs (issue 23 item 9), so its
 * start-up stays close to a bare `node`. A preload given with `--require` records the CommonJS
 * module cache as the process exits; the assertions are about which modules ran, never about
 * time (the start-up ratio itself is measured by `npm run bench`).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cliEnv, cliPath, runCli } from '../helpers/cli';
import { repoRoot, simDevice, testTempDir, writeScenario } from '../helpers/sim';

const twoIdleGpus = writeScenario({ devices: [simDevice(0), simDevice(1)] });
const probeDir = mkdtempSync(path.join(testTempDir(), 'module-probe-'));
const preload = path.join(probeDir, 'record-modules.cjs');
writeFileSync(
  preload,
  "process.on('exit', () => require('node:fs').writeFileSync(process.env.GPUGATE_TEST_MODULE_LIST, Object.keys(require.cache).join('\\n')));\n",
);

afterAll(() => rmSync(probeDir, { recursive: true, force: true }));

/** Modules a plain `check` never needs: each is for a flag or a failure `check` did not have. */
const NOT_FOR_A_PLAIN_CHECK = ['gate/reap', 'host/shm', 'cli/json-result', 'cli/run-wrapped', 'cli/report-file', 'cli/status-notifier'];

let runs = 0;

/** Run the real CLI with the probe; resolves to its exit code and the dist modules it loaded (as `cli/main`). */
async function loadedBy(args: readonly string[]): Promise<{ code: number | null; modules: string[] }> {
  runs += 1;
  const list = path.join(probeDir, `modules-${runs}.txt`);
  const run = await runCli(args, {
    env: cliEnv(twoIdleGpus, { GPUGATE_TEST_MODULE_LIST: list }),
    launch: [process.execPath, '--require', preload, cliPath()],
  });
  const dist = `${path.join(repoRoot(), 'dist')}${path.sep}`;
  const modules = readFileSync(list, 'utf8')
    .split('\n')
    .filter((file) => file.startsWith(dist) && file.endsWith('.js'))
    .map((file) => file.slice(dist.length, -'.js'.length));
  return { code: run.code, modules };
}

describe('gpugate check start-up', () => {
  it('loads the check command and the gate, and nothing a plain check does not use', async () => {
    const { code, modules } = await loadedBy(['check']);
    expect(code).toBe(0);
    // The probe sees what ran: the command and the gate are there.
    expect(modules).toEqual(expect.arrayContaining(['cli/main', 'cli/commands/check-command', 'gate/gate']));
    for (const name of NOT_FOR_A_PLAIN_CHECK) expect(modules, name).not.toContain(name);
    for (const command of ['wait', 'select', 'status', 'holders', 'doctor', 'demo', 'sim', 'bench', 'systemd', 'completion']) {
      expect(modules).not.toContain(`cli/commands/${command}-command`);
    }
  });

  it('loads the --json result code only when --json asks for it', async () => {
    const { code, modules } = await loadedBy(['check', '--json']);
    expect(code).toBe(0);
    expect(modules).toContain('cli/json-result');
    expect(modules).not.toContain('cli/run-wrapped');
  });

  it('loads the /dev/shm code (by import()) when the stale scan runs: --stale fail', async () => {
    const { code, modules } = await loadedBy(['check', '--stale', 'fail']);
    expect(code).toBe(0);
    expect(modules).toContain('host/shm');
    expect(modules).not.toContain('gate/reap');
  });
});
