/**
 * A holder that gpugate cannot see is never called `gone` ("memory should come back"): with a
 * second /proc mounted with hidepid over the first, read by a user that hidepid hides others'
 * processes from, and inside a nested PID namespace whose own procfs shows a single NSpid. Real
 * namespaces (unshare), a real procfs mount, a real holder, the built command as a subprocess.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync } from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEnv, cliPath } from '../helpers/cli';
import { repoRoot, simDevice, writeScenario } from '../helpers/sim';

const GiB = 1024 ** 3;
const children: ChildProcess[] = [];
let holder = 0;

beforeAll(() => {
  // A live root-owned holder in the host PID namespace.
  const child = spawn('sleep', ['120'], { stdio: 'ignore' });
  children.push(child);
  holder = child.pid!;
});

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
});

interface HoldersJson {
  nestedPidNamespace: boolean;
  gpus: Array<{ holders: Array<{ pid: number; class: string; reason: string }> }>;
}

function scenarioHeldBy(pid: number): string {
  return writeScenario({
    devices: [simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 40 * GiB }, processes: [{ pid, usedBytes: 40 * GiB }] })],
  });
}

/** Runs `script` (sh) in new namespaces; `gpugate holders --json` is `$GPUGATE`. Returns stdout. */
function inNamespaces(flags: string[], script: string, scenario: string): string {
  const env = cliEnv(scenario, { GPUGATE: `${process.execPath} ${cliPath()} holders --json`, REPO: repoRoot() });
  const run = spawnSync('unshare', [...flags, 'sh', '-euc', script], { encoding: 'utf8', env, timeout: 60_000 });
  if (run.status !== 0) throw new Error(`unshare ${flags.join(' ')} failed (${run.status}): ${run.stderr}\n${run.stdout}`);
  return run.stdout;
}

function holderClass(stdout: string): { class: string; reason: string; nested: boolean } {
  const json = JSON.parse(stdout.trim().split('\n').pop()!) as HoldersJson;
  const entry = json.gpus[0]!.holders[0]!;
  return { class: entry.class, reason: entry.reason, nested: json.nestedPidNamespace };
}

describe('invisible holders are unverifiable, not gone', () => {
  it('a /proc mounted with hidepid=2 over the first hides a root-owned holder from an unprivileged gpugate', () => {
    const scenario = scenarioHeldBy(holder);
    chmodSync(scenario, 0o644);
    // The scenario is copied where the unprivileged reader can open it (a tmpfs private to the namespace).
    const out = inNamespaces(
      ['--mount', '--propagation', 'private'],
      `mount -t proc -o hidepid=2 proc /proc
       mount -t tmpfs -o mode=0755 gpugate-test /mnt
       cp "$GPUGATE_SIM_SCENARIO" /mnt/scenario.json && chmod 0644 /mnt/scenario.json
       export GPUGATE_SIM_SCENARIO=/mnt/scenario.json
       # The checkout may sit below a folder only root can enter (mktemp -d): the reader runs the
       # command and the simulator from a bind mount of it on that tmpfs.
       mkdir /mnt/repo && mount --bind "$REPO" /mnt/repo
       export GPUGATE_NVML_LIBRARY="/mnt/repo/\${GPUGATE_NVML_LIBRARY#"$REPO"/}"
       GPUGATE="${process.execPath} /mnt/repo/${path.relative(repoRoot(), cliPath())} holders --json"
       setpriv --reuid 65534 --regid 65534 --clear-groups sh -c 'test ! -e /proc/${holder} && $GPUGATE'`,
      scenario,
    );
    const result = holderClass(out);
    expect(result.class).toBe('unverifiable');
    expect(result.reason).toMatch(/procfs is mounted with hidepid=invisible/);
  });

  it('inside a nested PID namespace (its own procfs, one NSpid) a live host holder is unverifiable', () => {
    const scenario = scenarioHeldBy(holder);
    const out = inNamespaces(
      ['--mount', '--propagation', 'private', '--pid', '--fork'],
      `mount -t proc -o hidepid=2 proc /proc
       grep -q '^NSpid:[[:space:]]*[0-9]*$' /proc/self/status
       $GPUGATE`,
      scenario,
    );
    const result = holderClass(out);
    expect(result.nested).toBe(true);
    expect(result.class).toBe('unverifiable');
    expect(result.reason).toMatch(/nested PID namespace \(pid:\[\d+\], not the initial pid:\[4026531836\]\)/);
  });

  it('a procfs of another PID namespace at /proc is not trusted either', () => {
    const scenario = scenarioHeldBy(holder);
    // gpugate stays in the host namespace; the procfs on /proc is a child namespace's.
    const out = inNamespaces(
      ['--mount', '--propagation', 'private'],
      `unshare --pid --fork --kill-child sh -c 'mount -t proc proc /proc; sleep 30' >/dev/null 2>&1 &
       child=$!
       trap 'kill -KILL $child 2>/dev/null' EXIT
       i=0; until [ "$(readlink /proc/self 2>/dev/null || echo none)" = none ]; do i=$((i+1)); [ $i -lt 200 ] || exit 3; sleep 0.05; done
       $GPUGATE`,
      scenario,
    );
    const result = holderClass(out);
    expect(result.class).toBe('unverifiable');
    expect(result.reason).toMatch(/the procfs at \/proc belongs to another PID namespace/);
  });

  it('with the host /proc a holder that really exited is still gone', () => {
    const exited = spawnSync('true').pid;
    const scenario = scenarioHeldBy(exited);
    const out = inNamespaces(['--mount', '--propagation', 'private'], '$GPUGATE', scenario);
    expect(holderClass(out)).toEqual({ class: 'gone', reason: expect.stringMatching(/memory should come back/), nested: false });
  });
});
