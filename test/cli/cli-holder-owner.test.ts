/**
 * Who owns a holder, from the built command on a simulated host whose holders are real
 * processes: one started as another uid (setpriv) and moved into a real service cgroup, one a
 * `spawn` holder of `gpugate sim` (a reparented engine worker). `holders --json` carries uid,
 * user, start, age, the whole argv and the unit; the table says "of UNIT, user NAME, started N s
 * ago" with the command shortened; `check` names the owner in its final line, its report file,
 * its JSON and its stale-holder line.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parsePasswd } from '../../src/host/process-owner';
import { cgroupUnavailable, makeServiceCgroup, type HierarchyName } from '../helpers/cgroups';
import { cliEnv, parseJsonOutput, runCli, startCli, type CliProcess } from '../helpers/cli';
import { isAlive, until } from '../helpers/processes';
import { simDevice, writeScenario } from '../helpers/sim';
import { makeTestTempDir } from '../helpers/temp-root';
import { logText } from '../helpers/log-lines';

const GiB = 2 ** 30;
const UID = 65534;
/** argv[0] of the holder: a title with its flags, longer than the table shows. */
const TITLE = 'VLLM::Worker_TP3 --model /models/Llama-3.1-70B-Instruct --tensor-parallel-size 8';

function whyNot(): string | null {
  if (spawnSync('setpriv', ['--version']).status !== 0) return 'setpriv (util-linux) is not installed';
  if (process.getuid?.() !== 0) return 'needs root to start a process as another uid';
  if (cgroupUnavailable('named') !== null && cgroupUnavailable('unified') !== null) return `cannot create a cgroup: ${cgroupUnavailable('unified')}`;
  return null;
}
const skip = whyNot();

interface OwnerJson {
  uid: number | null;
  user: string | null;
  startedAt: number | null;
  ageMs: number | null;
  argv: string[] | null;
  location: { unit: string | null; userManagerUid: number | null; container: unknown; pod: unknown };
}
interface HolderJson { pid: number; class: string; name: string; unit: string | null; owner: OwnerJson | null }

describe.skipIf(skip !== null)(`holders carry their owner${skip === null ? '' : ` (skipped: ${skip})`}`, () => {
  const cleanups: Array<() => void> = [];
  let holder = 0;
  let unit = '';
  let sim: CliProcess | null = null;
  let env: NodeJS.ProcessEnv = {};
  let worker = 0;
  const expectedUser = parsePasswd(readFileSync('/etc/passwd', 'utf8')).get(UID) ?? null;
  const userText = expectedUser === null ? `uid ${UID}` : `user ${expectedUser}`;
  const work = makeTestTempDir('gpugate-owner-cli-');

  beforeAll(async () => {
    const hierarchy: HierarchyName = cgroupUnavailable('named') === null ? 'named' : 'unified';
    const group = makeServiceCgroup(hierarchy, 'gpugate-test-vllm', cleanups).unit;
    unit = path.basename(group.path);
    const child = spawn('setpriv', [`--reuid=${UID}`, `--regid=${UID}`, '--clear-groups', '--', 'bash', '-c', 'exec -a "$0" sleep 120', TITLE], { stdio: 'ignore' });
    child.on('error', () => {});
    holder = child.pid!;
    await until(`holder ${holder} to exec`, () => {
      try {
        return readFileSync(`/proc/${holder}/comm`, 'utf8').trim() === 'sleep';
      } catch {
        return false;
      }
    });
    group.join(holder);
    // GPU 0: the holder above, bound by pid; GPU 1: a reparented worker that `gpugate sim` starts.
    const scenario = writeScenario({
      devices: [
        simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 40 * GiB }, processes: [{ pid: holder, usedBytes: 40 * GiB }] }),
        simDevice(1, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 30 * GiB }, processes: [{ spawn: { comm: 'VLLM::Worker_TP6' }, usedBytes: 30 * GiB }] }),
      ],
    });
    sim = startCli(['sim', '--scenario', scenario], { env: cliEnv(null), killAfterMs: 120_000 });
    await sim.waitFor(/event=sim-running gpus=2 /);
    env = cliEnv(null);
    for (const m of sim.stdout().matchAll(/^export (\w+)='([^']*)'/gm)) env[m[1]!] = m[2]!;
    const json = parseJsonOutput(await runCli(['holders', '--json'], { env }));
    worker = (json['gpus'] as Array<{ holders: HolderJson[] }>)[1]!.holders[0]!.pid;
  }, 60_000);

  afterAll(async () => {
    sim?.child.kill('SIGINT');
    if (sim !== null) await sim.done;
    try {
      process.kill(holder, 'SIGKILL');
    } catch {
      // gone already
    }
    await until(`holder ${holder} to exit`, () => !isAlive(holder)).catch(() => {});
    for (const cleanup of cleanups.splice(0).reverse()) cleanup();
    spawnSync('rm', ['-rf', work]);
  });

  it('holders --json: uid, user, start, age, the whole argv and the unit', async () => {
    const run = await runCli(['holders', '--json'], { env });
    expect(run.code).toBe(0);
    const json = parseJsonOutput(run);
    const takenAt = json['takenAt'] as number;
    const [gpu0, gpu1] = (json['gpus'] as Array<{ holders: HolderJson[] }>).map((gpu) => gpu.holders);
    expect(gpu0).toHaveLength(1);
    const owner = gpu0![0]!.owner!;
    expect(gpu0![0]).toMatchObject({ pid: holder, name: 'VLLM::Worker_TP3', unit });
    expect(owner).toMatchObject({ uid: UID, user: expectedUser, argv: [TITLE, '120'], location: { unit, userManagerUid: null, container: null, pod: null } });
    expect(owner.startedAt).toBeLessThanOrEqual(takenAt + 1000);
    expect(owner.ageMs).toBe(Math.max(0, takenAt - owner.startedAt!));
    // The spawned worker: root's, reparented, of no unit here (the test runs outside one) or of the test's own.
    const workerOwner = gpu1![0]!.owner!;
    expect(gpu1![0]).toMatchObject({ pid: worker, class: 'orphan', name: 'VLLM::Worker_TP6' });
    expect(workerOwner).toMatchObject({ uid: 0, user: 'root', argv: expect.arrayContaining(['VLLM::Worker_TP6']) });
  });

  it('holders (text): "of UNIT, user NAME, started N s ago" and the command shortened; the stale line names the owner', async () => {
    // Wide enough to keep each row whole (off a terminal, tables fit 80 columns).
    const run = await runCli(['holders'], { env: { ...env, COLUMNS: '400' } });
    expect(run.code).toBe(0);
    const row = run.stdout.split('\n').find((line) => line.startsWith(`0 `) && line.includes(String(holder)))!;
    expect(row).toMatch(new RegExp(`^0 +${holder} +active +40GiB +S +\\d+ +VLLM::Worker_TP3 +of ${unit.replace(/\./g, '\\.')}, ${userText}, started \\d+ (s|min) ago +VLLM::Worker_TP3 --model /models/Llama`));
    // 60 characters of the command line, then an ellipsis; the whole of it is in JSON.
    expect(row).toContain(`${[...TITLE].slice(0, 59).join('')}…`);
    expect(row).not.toContain(TITLE);
    const workerRow = run.stdout.split('\n').find((line) => line.startsWith('1 ') && line.includes(String(worker)))!;
    expect(workerRow).toMatch(/ orphan .* user root, started \d+ (s|min) ago /);
    expect(run.stderr).toMatch(new RegExp(`^event=stale gpu=1 pid=${worker} class=orphan name=VLLM::Worker_TP6 owner="(of \\S+, )?user root, started \\d+ (s|min) ago" `, 'm'));
  });

  it('check: the final line, the report file and the JSON name the owner', async () => {
    const report = path.join(work, 'report.txt');
    const run = await runCli(['check', '--gpus', '0', '--max-used', '1GiB', '--report-file', report], { env });
    expect(run.code).toBe(75);
    const said = new RegExp(`held by ${holder}/VLLM::Worker_TP3/active \\(of ${unit.replace(/\./g, '\\.')}, ${userText}, started \\d+ (s|min) ago\\)`);
    expect(logText(run.stderr)).toMatch(said);
    expect(readFileSync(report, 'utf8')).toMatch(said);
    const json = parseJsonOutput(await runCli(['check', '--gpus', '0', '--max-used', '1GiB', '--json'], { env }));
    const holders = (json['gpus'] as Array<{ holders: HolderJson[] }>)[0]!.holders;
    expect(holders[0]!.owner).toMatchObject({ uid: UID, user: expectedUser, argv: [TITLE, '120'], location: { unit } });
    // The wait's stale-holder line names the orphan's owner too.
    const orphan = await runCli(['check', '--gpus', '1', '--max-used', '1GiB'], { env });
    expect(orphan.code).toBe(75);
    expect(orphan.stderr).toMatch(new RegExp(`^event=stale gpu=1 pid=${worker} class=orphan name=VLLM::Worker_TP6 used=30GiB used_bytes=${30 * GiB} state=S ppid=\\d+ (unit=\\S+ )?owner="(of \\S+, )?user root, started \\d+ (s|min) ago" `, 'm'));
  });
});
