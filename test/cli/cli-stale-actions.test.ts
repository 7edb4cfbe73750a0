/**
 * Stale handling from the command line, with real processes and real /dev/shm files:
 * --stale fail ends at once (75) on an orphaned engine worker; --kill-stale never signals a
 * holder that is not proven to be this service's leftover; --clean-shm removes only unreferenced
 * matching files, removes nothing while some process cannot be inspected, and --dry-run removes
 * nothing. The /dev/shm cases run in their own PID namespace with its own /proc and /dev/shm, so
 * which processes exist (and whether each can be inspected) is known rather than whatever the
 * machine runs.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cliEnv, cliPath, parseJsonOutput, runCli } from '../helpers/cli';
import { isAlive } from '../helpers/processes';
import { repoRoot, simDevice, writeScenario } from '../helpers/sim';
import { makeTestTempDir } from '../helpers/temp-root';

const GiB = 1024 ** 3;
const orphans: number[] = [];

afterAll(() => {
  for (const pid of orphans) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
});

/** A real reparented process titled like a vLLM worker. */
function startOrphan(title: string): number {
  const started = spawnSync('bash', ['-c', `exec -a ${title} sleep 60 </dev/null >/dev/null 2>&1 & echo $!`], { encoding: 'utf8' });
  const pid = Number(started.stdout.trim());
  orphans.push(pid);
  // The background subshell may not have exec'd yet: wait until the title is in place.
  for (let i = 0; i < 200; i += 1) {
    let cmdline = '';
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      // not there yet
    }
    if (cmdline.startsWith(`${title}\0`)) break;
    spawnSync('sleep', ['0.025']);
  }
  return pid;
}

function heldBy(pid: number): string {
  return writeScenario({
    devices: [simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 40 * GiB }, processes: [{ pid, usedBytes: 40 * GiB, kinds: ['compute'] }] })],
  });
}

describe('stale handling', () => {
  it('--stale fail exits 75 at once on an orphaned engine worker, naming it', async () => {
    const pid = startOrphan('VLLM::Worker_TP2');
    const run = await runCli(['wait', '--stale', 'fail', '--timeout', '60s', '--json'], { env: cliEnv(heldBy(pid)) });
    expect(run.code).toBe(75);
    expect(run.elapsedMs).toBeLessThan(30_000);
    const json = parseJsonOutput(run);
    expect(json.result).toBe('stale');
    expect(String(json.reason)).toContain(`pid ${pid} (orphan`);
    expect(json.stale).toMatchObject({ holders: [expect.objectContaining({ pid, class: 'orphan', name: 'VLLM::Worker_TP2' })] });
  });

  it('--stale ignore skips the /proc scan: no stale finding is logged', async () => {
    const pid = startOrphan('VLLM::Worker_TP4');
    const run = await runCli(['check', '--stale', 'ignore', '--json'], { env: cliEnv(heldBy(pid)) });
    expect(run.code).toBe(75);
    expect(run.stderr).not.toContain('stale gpu=');
  });

  it('--kill-stale does not signal an orphan that is not proven to be a leftover of this service', async () => {
    const pid = startOrphan('VLLM::Worker_TP5');
    const run = await runCli(['check', '--kill-stale', '--kill-grace', '1s', '--json'], { env: cliEnv(heldBy(pid)) });
    expect(run.code).toBe(75);
    const json = parseJsonOutput(run);
    const signals = (json.actions as { signals: Array<{ pid: number; result: string; signal: string | null }> }).signals;
    expect(signals).toContainEqual(expect.objectContaining({ pid, result: 'skipped', signal: null }));
    expect(isAlive(pid)).toBe(true);
  });
});

/** One gpugate run inside the namespace: its exit status and stdout, written to the out folder by the script. */
interface NamespacedRun {
  code: number;
  json: Record<string, unknown>;
}

/**
 * Runs `steps` (sh) with a private tmpfs on /dev/shm in a new mount namespace, so that every
 * process that could hold a /dev/shm file is known: unshare's shell, gpugate, and what the steps
 * start. `namespaces` 'mount' keeps the host's PID namespace and /proc (the only view in which
 * gpugate may prove a file unused); 'pid' adds a new PID namespace with its own /proc, as in a
 * container. In the steps, `run NAME ARGS…` runs `gpugate ARGS… --json` (as `$AS` when set) and
 * records it as NAME, `mark WORD` records WORD; `$SHM_FILE` is the test file.
 */
function inPrivateShm(namespaces: 'mount' | 'pid', steps: string, name: string): { runs: Record<string, NamespacedRun>; marks: string[]; present: boolean } {
  const out = makeTestTempDir('gpugate-shm-ns-');
  const scenario = writeScenario({ devices: [simDevice(0)] });
  const script = `
    mount -t tmpfs -o mode=1777 gpugate-test-shm /dev/shm
    SHM_FILE=/dev/shm/${name}
    head -c 65536 /dev/zero > "$SHM_FILE"
    mark() { touch "$OUT/$1.mark"; }
    run() { what=$1; shift; set +e; $AS $GPUGATE "$@" --json > "$OUT/$what.json"; echo $? > "$OUT/$what.code"; set -e; }
    ${steps}
    if test -e "$SHM_FILE"; then echo present > "$OUT/after"; else echo absent > "$OUT/after"; fi
  `;
  const env = cliEnv(scenario, { GPUGATE: `${process.execPath} ${cliPath()}`, OUT: out, AS: '', REPO: repoRoot() });
  try {
    const run = spawnSync('unshare', [...(namespaces === 'pid' ? ['--pid', '--fork', '--mount-proc'] : []), '--mount', '--propagation', 'private', 'sh', '-euc', script], { encoding: 'utf8', env, timeout: 60_000 });
    if (run.status !== 0) throw new Error(`unshare failed (${run.status}): ${run.stderr}\n${run.stdout}`);
    const runs: Record<string, NamespacedRun> = {};
    for (const file of readdirSync(out).filter((f) => f.endsWith('.json'))) {
      const what = file.slice(0, -'.json'.length);
      const text = readFileSync(path.join(out, file), 'utf8').trim();
      runs[what] = { code: Number(readFileSync(path.join(out, `${what}.code`), 'utf8')), json: JSON.parse(text) as Record<string, unknown> };
    }
    const marks = readdirSync(out).filter((f) => f.endsWith('.mark')).map((f) => f.slice(0, -'.mark'.length));
    return { runs, marks, present: readFileSync(path.join(out, 'after'), 'utf8').trim() === 'present' };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/**
 * Steps that prepare an unprivileged gpugate (run it with `AS="$AS_NOBODY"`): it runs the command
 * and the simulator from a bind mount, as the checkout may sit below a root-only folder.
 */
const UNPRIVILEGED_READER = `
       mount -t tmpfs -o mode=0755 gpugate-test-repo /mnt
       cp "$GPUGATE_SIM_SCENARIO" /mnt/scenario.json && chmod 0644 /mnt/scenario.json
       export GPUGATE_SIM_SCENARIO=/mnt/scenario.json
       mkdir /mnt/repo && mount --bind "$REPO" /mnt/repo
       export GPUGATE_NVML_LIBRARY="/mnt/repo/\${GPUGATE_NVML_LIBRARY#"$REPO"/}"
       GPUGATE="${process.execPath} /mnt/repo/${path.relative(repoRoot(), cliPath())}"
       chmod 0777 "$OUT"
       AS_NOBODY="setpriv --reuid 65534 --regid 65534 --clear-groups"`;

function shmActions(run: NamespacedRun | undefined): unknown[] {
  return (run?.json.actions as { shm: unknown[] } | undefined)?.shm ?? [];
}

describe('--clean-shm', () => {
  it('removes nothing from a nested PID namespace, not even with --dry-run: processes outside it may hold the file unseen', () => {
    const name = `nccl-gpugate-cli-test-nested-${process.pid}`;
    const { runs, marks, present } = inPrivateShm(
      'pid',
      `run dry check --clean-shm ${name} --dry-run
       if test -e "$SHM_FILE"; then mark kept-by-dry-run; fi
       run real check --clean-shm ${name}`,
      name,
    );
    const refusal = expect.objectContaining({ path: `/dev/shm/${name}`, result: 'skipped', reason: expect.stringMatching(/^cannot prove it unused: gpugate runs in a nested PID namespace/) });
    expect(runs.dry?.code).toBe(0);
    expect(shmActions(runs.dry)).toEqual([refusal]);
    expect(marks).toContain('kept-by-dry-run');
    expect(runs.real?.code).toBe(0);
    expect(shmActions(runs.real)).toEqual([refusal]);
    expect(present).toBe(true);
  });

  it('removes nothing while a process it cannot inspect exists, and names it', () => {
    const name = `nccl-gpugate-cli-test-blind-${process.pid}`;
    // A root-owned process whose open files an unprivileged gpugate cannot read.
    const { runs, present } = inPrivateShm(
      'mount',
      `sleep 60 & BLIND=$!
       ${UNPRIVILEGED_READER}
       AS="$AS_NOBODY"
       run real check --clean-shm ${name}
       kill $BLIND`,
      name,
    );
    expect(runs.real?.code).toBe(0);
    expect(shmActions(runs.real)).toEqual([
      expect.objectContaining({ path: `/dev/shm/${name}`, result: 'skipped', reason: expect.stringMatching(/^cannot prove it unused: the open files of \d+ process\(es\) are unreadable/) }),
    ]);
    expect(present).toBe(true);
  });

  it('removes nothing when procfs hides other users\' processes (hidepid=2) from an unprivileged gpugate', () => {
    const name = `nccl-gpugate-cli-test-hidepid-${process.pid}`;
    const { runs, present } = inPrivateShm(
      'mount',
      `mount -t proc -o hidepid=2 proc /proc
       ${UNPRIVILEGED_READER}
       AS="$AS_NOBODY --inh-caps=-all --bounding-set=-all"
       run real check --clean-shm ${name}`,
      name,
    );
    expect(runs.real?.code).toBe(0);
    expect(shmActions(runs.real)).toEqual([
      expect.objectContaining({ path: `/dev/shm/${name}`, result: 'skipped', reason: expect.stringMatching(/^cannot prove it unused: procfs is mounted with hidepid=(2|invisible) and gpugate lacks CAP_SYS_PTRACE/) }),
    ]);
    expect(present).toBe(true);
  });

  it('lists an unreferenced engine file as leaked shm with its size', () => {
    const name = `nccl-gpugate-cli-leak-${process.pid}`;
    const { runs } = inPrivateShm('pid', 'run holders holders', name);
    expect(runs.holders?.code).toBe(0);
    const shm = (runs.holders?.json.stale as { shm: { leaked: Array<{ path: string; sizeBytes: number }>; tmpfsFreeBytes: number | null } }).shm;
    expect(shm.leaked).toContainEqual(expect.objectContaining({ path: `/dev/shm/${name}`, sizeBytes: 64 * 1024 }));
    expect(shm.tmpfsFreeBytes).toBeGreaterThan(0);
  });

  it('rejects a glob with a slash (exit 64): only names inside /dev/shm', async () => {
    const run = await runCli(['check', '--clean-shm', '../etc/*'], { env: cliEnv(writeScenario({ devices: [simDevice(0)] })) });
    expect(run.code).toBe(64);
    expect(run.stderr).toContain('no slashes');
  });
});
