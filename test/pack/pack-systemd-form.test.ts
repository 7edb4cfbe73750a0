/**
 * The gate line `gpugate systemd` generates, from the packed tarball as users install it: from a
 * global install (`npm install -g --prefix P`, root-owned, in a place that stays) it names the
 * installed command P/bin/gpugate, whose shebang runs on the service's search path; from a
 * project's node_modules it names the installed command when the service's search path has one,
 * else node and the project's main.js with a warning (stderr and `gateProgram.unstable`) that
 * the next `npm ci` takes them away; an installed command another user may change is never named.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { chownSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { preparePackage } from '../../scripts/prepared-package.cjs';
import { makeTestTempDir } from '../helpers/temp-root';

const UNIT = '[Service]\nExecStart=/usr/bin/vllm serve some-model --gpu-memory-utilization 0.85\nRestart=on-failure\nRestartSec=10\n';
const GATE_WORDS = 'wait --for vllm --min-free 0.85 --margin 2GiB --stable 5s --timeout 240s --notify';
const UNSTABLE_WARNING = 'the gate line depends on a path a service should not depend on';

interface SystemdDocument {
  execStartPre: string;
  gateProgram: { form: string; command: string; runningFrom: string; why: string | null; unstable: string[] };
}

describe('gpugate systemd from an installed tarball: the stable gate form', () => {
  // A prefix outside every temporary and home directory, as /usr/local is: /opt, made by root.
  let prefix = '';
  let work = '';
  let project = '';
  let unitDir = '';
  let emptyDir = '';
  let env: NodeJS.ProcessEnv = {};

  function npm(args: string[], cwd: string): void {
    const run = spawnSync('npm', [...args, '--prefer-offline', '--no-audit', '--no-fund'], { cwd, env: process.env, encoding: 'utf8', timeout: 300_000 });
    expect(run.status, `npm ${args.join(' ')} failed:\n${run.stdout}\n${run.stderr}`).toBe(0);
  }

  function systemd(command: string, servicePath: string): { run: SpawnSyncReturns<string>; doc: SystemdDocument } {
    const run = spawnSync(command, ['systemd', '--unit', 'llm', '--unit-path', unitDir, '--json'], {
      env: { ...env, GPUGATE_SERVICE_PATH: servicePath }, encoding: 'utf8', timeout: 120_000,
    });
    expect(run.status, run.stderr).toBe(0);
    return { run, doc: JSON.parse(run.stdout) as SystemdDocument };
  }

  beforeAll(() => {
    const prepared = preparePackage();
    prefix = mkdtempSync('/opt/gpugate-test-prefix-');
    npm(['install', '--global', '--prefix', prefix, prepared.tarball], prefix);
    // The Node a service finds on its search path (P/bin here): the shebang's `env -S node` needs it.
    symlinkSync(process.execPath, join(prefix, 'bin', 'node'));
    work = makeTestTempDir('gpugate-pack-systemd-');
    project = join(work, 'project');
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'project', version: '1.0.0', private: true }));
    npm(['install', prepared.tarball], project);
    unitDir = join(work, 'units');
    mkdirSync(unitDir);
    writeFileSync(join(unitDir, 'llm.service'), UNIT);
    emptyDir = join(work, 'empty');
    mkdirSync(emptyDir);
    const pkg = join(prefix, 'lib', 'node_modules', 'gpugate');
    env = {
      PATH: `${join(prefix, 'bin')}:/usr/bin:/bin`,
      // NVML answers (the bundled simulator), so the only warnings are about the gate's program.
      GPUGATE_NVML_LIBRARY: join(pkg, 'prebuilds', 'linux-x64', 'gpugate_sim.so'),
      GPUGATE_SIM_SCENARIO: join(pkg, 'scenarios', 'idle-8x-rtx-pro-6000.json'),
    };
  }, 900_000);

  afterAll(() => {
    if (prefix !== '') rmSync(prefix, { recursive: true, force: true });
    if (work !== '') rmSync(work, { recursive: true, force: true });
  });

  it('run as the installed command, names the installed command, warns of nothing, and that line starts the gate', () => {
    const command = join(prefix, 'bin', 'gpugate');
    const { run, doc } = systemd(command, join(prefix, 'bin'));
    expect(doc.execStartPre).toBe(`${command} ${GATE_WORDS}`);
    expect(doc.gateProgram).toMatchObject({ form: 'installed-command', command, why: null, unstable: [] });
    expect(doc.gateProgram.runningFrom).toBe(realpathSync(join(prefix, 'lib', 'node_modules', 'gpugate', 'dist', 'cli', 'main.js')));
    expect(run.stderr).not.toContain(UNSTABLE_WARNING);
    // The line's words, run with only the service's search path: the shebang finds node there.
    const [program, ...args] = doc.execStartPre.split(' ');
    const gate = spawnSync(program as string, args, { env: { ...env, PATH: join(prefix, 'bin') }, encoding: 'utf8', timeout: 120_000 });
    expect(gate.status, gate.stderr).toBe(0);
    expect(gate.stderr).toMatch(/ready gpus=0,1,2,3,4,5,6,7/);
  }, 180_000);

  it('run from a project\'s node_modules where a service has no gpugate, names node and the project\'s main.js, and warns', () => {
    const { run, doc } = systemd(join(project, 'node_modules', '.bin', 'gpugate'), emptyDir);
    const main = realpathSync(join(project, 'node_modules', 'gpugate', 'dist', 'cli', 'main.js'));
    expect(doc.gateProgram.form).toBe('node-script');
    expect(doc.execStartPre).toBe(`${realpathSync(process.execPath)} --disable-sigusr1 ${main} ${GATE_WORDS}`);
    expect(doc.gateProgram.why).toContain(`no gpugate command a service can rely on in ${emptyDir}`);
    const projectWarning = `gpugate's main.js ${main} is in the node_modules of the project ${realpathSync(project)}, replaced or removed by its next npm install or npm ci`;
    expect(doc.gateProgram.unstable).toContain(projectWarning);
    expect(run.stderr).toContain(`${UNSTABLE_WARNING}: ${projectWarning}`);
  }, 180_000);

  it('run from a project\'s node_modules where a service finds the installed command, names that command', () => {
    const { run, doc } = systemd(join(project, 'node_modules', '.bin', 'gpugate'), join(prefix, 'bin'));
    expect(doc.execStartPre).toBe(`${join(prefix, 'bin', 'gpugate')} ${GATE_WORDS}`);
    expect(doc.gateProgram).toMatchObject({ form: 'installed-command', unstable: [] });
    expect(doc.gateProgram.runningFrom).toBe(realpathSync(join(project, 'node_modules', 'gpugate', 'dist', 'cli', 'main.js')));
    expect(run.stderr).not.toContain(UNSTABLE_WARNING);
  }, 180_000);

  it('never names an installed command that a user other than root may change', () => {
    const main = join(prefix, 'lib', 'node_modules', 'gpugate', 'dist', 'cli', 'main.js');
    chownSync(main, 65534, 65534);
    try {
      const { doc } = systemd(join(project, 'node_modules', '.bin', 'gpugate'), join(prefix, 'bin'));
      expect(doc.gateProgram.form).toBe('node-script');
      expect(doc.gateProgram.why).toContain(`${main} may be changed by a user other than root`);
      expect(doc.execStartPre).not.toContain(join(prefix, 'bin', 'gpugate'));
    } finally {
      chownSync(main, 0, 0);
    }
  }, 180_000);

  it('the shipped contrib files name the same installed command', () => {
    const root = join(__dirname, '..', '..');
    for (const file of ['contrib/systemd/gpugate-wait.conf', 'contrib/systemd/vllm@.service']) {
      const gates = readFileSync(join(root, file), 'utf8').split('\n').filter((line) => line.startsWith('ExecStartPre='));
      expect(gates, file).toEqual([`ExecStartPre=/usr/local/bin/gpugate ${GATE_WORDS.replace('0.85', '0.9')}`]);
    }
  });
});
