/**
 * Files gpugate writes as root, attacked by an unprivileged user (uid 65534 through setpriv) with
 * real symlinks, FIFOs, hard locks and file systems: `--output`, `--report-file`, the lease
 * directory and its lock, `systemd --write`, and a full or read-only lease file system. Each case
 * runs the built command as a subprocess inside a new mount namespace whose tmpfs on /mnt holds
 * everything the attacker touches, so nothing outlives the namespace. Every gpugate run is bounded
 * by `timeout -s KILL`, so a hang shows as exit 137 instead of stopping the suite.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cliEnv, cliPath } from '../helpers/cli';
import { repoRoot, simDevice, writeScenario } from '../helpers/sim';
import { makeTestTempDir } from '../helpers/temp-root';
import { logText } from '../helpers/log-lines';

const work = makeTestTempDir('gpugate-root-files-');
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** Each case starts a namespace and several real gpugate processes. */
const CASE_TIMEOUT_MS = 120_000;

const UNIT = '[Unit]\nDescription=An LLM server\n\n[Service]\nExecStart=/usr/bin/vllm serve some-model --gpu-memory-utilization 0.85\nRestart=on-failure\nRestartSec=10\n';

/** What the steps left: each gpugate run by name (exit code, stdout, stderr) and each `note NAME VALUE`. */
interface Observed {
  runs: Record<string, { code: number; stdout: string; stderr: string }>;
  notes: Record<string, string>;
}

/**
 * Runs `steps` (sh -eu) as root in a new mount namespace with a fresh tmpfs (mode 0755) on /mnt.
 * In the steps: `run NAME ARGS…` runs gpugate (killed after 30 s; as `$AS` when set),
 * `note NAME COMMAND…` records a command's output, `$AS_NOBODY` runs a command as uid 65534, and
 * `$UNPRIVILEGED_GPUGATE` makes the next runs reachable by uid 65534 (the checkout may sit below
 * a root-only folder: it is bind-mounted on /mnt/repo, the scenario copied to /mnt).
 */
function asRootBesideAnAttacker(steps: string): Observed {
  const out = makeTestTempDir('gpugate-root-files-out-');
  const script = `
    mount -t tmpfs -o mode=0755 gpugate-test-files /mnt
    export AS_NOBODY="setpriv --reuid 65534 --regid 65534 --clear-groups"
    run() {
      name=$1; shift
      set +e
      timeout -s KILL 30 \${AS:-} $GPUGATE "$@" > "$OUT/$name.stdout" 2> "$OUT/$name.stderr" < /dev/null
      echo $? > "$OUT/$name.code"
      set -e
    }
    note() { name=$1; shift; "$@" > "$OUT/$name.note" 2>&1 || echo "failed: $?" >> "$OUT/$name.note"; }
    UNPRIVILEGED_GPUGATE='
      mkdir /mnt/repo && mount --bind "$REPO" /mnt/repo
      cp "$GPUGATE_SIM_SCENARIO" /mnt/scenario.json && chmod 0644 /mnt/scenario.json
      export GPUGATE_SIM_SCENARIO=/mnt/scenario.json
      export GPUGATE_NVML_LIBRARY="/mnt/repo/\${GPUGATE_NVML_LIBRARY#"$REPO"/}"
      GPUGATE="$NODE /mnt/repo/$CLI"'
    ${steps}
  `;
  const scenario = writeScenario({ devices: [simDevice(0)] });
  const unitDir = path.join(work, `units-${path.basename(out)}`);
  mkdirSync(unitDir);
  writeFileSync(path.join(unitDir, 'llm.service'), UNIT);
  const env = cliEnv(scenario, {
    GPUGATE: `${process.execPath} ${cliPath()}`, NODE: process.execPath, REPO: repoRoot(), CLI: path.relative(repoRoot(), cliPath()),
    OUT: out, UNITS: unitDir, GPUGATE_SYSFS_ROOT: path.join(work, 'no-sysfs'),
  });
  try {
    const shell = spawnSync('unshare', ['--mount', '--propagation', 'private', 'sh', '-euc', script], { encoding: 'utf8', env, timeout: 120_000 });
    if (shell.status !== 0) throw new Error(`the steps failed (${shell.status ?? shell.signal}): ${shell.stderr}\n${shell.stdout}`);
    const observed: Observed = { runs: {}, notes: {} };
    for (const file of readdirSync(out)) {
      const text = readFileSync(path.join(out, file), 'utf8');
      if (file.endsWith('.note')) observed.notes[file.slice(0, -'.note'.length)] = text.trim();
      if (file.endsWith('.code')) {
        const name = file.slice(0, -'.code'.length);
        observed.runs[name] = { code: Number(text), stdout: readFileSync(path.join(out, `${name}.stdout`), 'utf8'), stderr: readFileSync(path.join(out, `${name}.stderr`), 'utf8') };
      }
    }
    return observed;
  } finally {
    rmSync(out, { recursive: true, force: true });
    rmSync(unitDir, { recursive: true, force: true });
  }
}

function runOf(observed: Observed, name: string): { code: number; stdout: string; stderr: string } {
  const run = observed.runs[name];
  if (run === undefined) throw new Error(`no run named ${name}`);
  return run;
}

/** A root-owned 0600 file the attacker wants overwritten. */
const VICTIM = `printf 'root secret\\n' > /mnt/victim && chmod 0600 /mnt/victim`;

describe('--output', () => {
  it('never writes through the symbolic links an unprivileged user planted in a sticky directory (at the old temporary name and at PATH): it replaces the link', () => {
    const seen = asRootBesideAnAttacker(`
      ${VICTIM}
      mkdir -m 1777 /mnt/textfile
      # exec keeps the pid, so $$ is gpugate's pid: the temporary name an older gpugate used.
      set +e
      timeout -s KILL 30 sh -c '$AS_NOBODY ln -s /mnt/victim /mnt/textfile/gpu.prom.tmp-$$ && $AS_NOBODY ln -s /mnt/victim /mnt/textfile/gpu.prom && exec $GPUGATE status --format prometheus --output /mnt/textfile/gpu.prom' > "$OUT/out.stdout" 2> "$OUT/out.stderr"
      echo $? > "$OUT/out.code"
      set -e
      note victim cat /mnt/victim
      note written stat -c '%F %U %a' /mnt/textfile/gpu.prom
      note head head -c 200 /mnt/textfile/gpu.prom
      note listing sh -c 'cd /mnt/textfile && for f in .* *; do test "$f" = . || test "$f" = .. || stat -c "%n %F %U" "$f"; done'
    `);
    const run = runOf(seen, 'out');
    expect(run.code, run.stderr).toBe(0);
    expect(seen.notes['victim']).toBe('root secret');
    expect(seen.notes['written']).toBe('regular file root 644');
    expect(seen.notes['head']).toContain('gpugate_up 1');
    // The planted link at the old temporary name is still a link; no temporary file is left.
    const listing = (seen.notes['listing'] ?? '').split('\n');
    expect(listing).toHaveLength(2);
    expect(listing).toContain('gpu.prom regular file root');
    expect(listing.find((line) => line.startsWith('gpu.prom.tmp-'))).toMatch(/^gpu\.prom\.tmp-\d+ symbolic link nobody$/);
  }, CASE_TIMEOUT_MS);

  it('is not blocked by a FIFO planted at PATH (reading the labels it recorded): the FIFO is replaced by the file', () => {
    const seen = asRootBesideAnAttacker(`
      mkdir -m 1777 /mnt/textfile
      $AS_NOBODY mkfifo /mnt/textfile/gpu.prom
      run fifo status --format prometheus --output /mnt/textfile/gpu.prom
      note written stat -c '%F %U %a' /mnt/textfile/gpu.prom
    `);
    const run = runOf(seen, 'fifo');
    expect(run.code, run.stderr).toBe(0);
    expect(seen.notes['written']).toBe('regular file root 644');
  }, CASE_TIMEOUT_MS);

  it('refuses (exit 77) a directory owned by the unprivileged user, a directory writable by all without the sticky bit, and a symbolic link on the way, naming each', () => {
    const seen = asRootBesideAnAttacker(`
      ${VICTIM}
      mkdir /mnt/theirs && chown 65534:65534 /mnt/theirs
      mkdir -m 0777 /mnt/open && chmod 0777 /mnt/open
      mkdir -m 1777 /mnt/shared && mkdir /mnt/real
      $AS_NOBODY ln -s /mnt/real /mnt/shared/link
      run theirs status --format prometheus --output /mnt/theirs/gpu.prom
      run open status --format prometheus --output /mnt/open/gpu.prom
      run linked status --format prometheus --output /mnt/shared/link/gpu.prom
      note theirs ls -A /mnt/theirs
      note open ls -A /mnt/open
      note real ls -A /mnt/real
      note victim cat /mnt/victim
    `);
    expect(runOf(seen, 'theirs').code).toBe(77);
    expect(logText(runOf(seen, 'theirs').stderr)).toContain('/mnt/theirs is owned by uid 65534: gpugate writes only below directories owned by root');
    expect(runOf(seen, 'open').code).toBe(77);
    expect(logText(runOf(seen, 'open').stderr)).toContain('/mnt/open is writable by every user (mode 0777) and not sticky');
    expect(runOf(seen, 'linked').code).toBe(77);
    expect(logText(runOf(seen, 'linked').stderr)).toContain('/mnt/shared/link is not a plain directory but a symbolic link');
    expect([seen.notes['theirs'], seen.notes['open'], seen.notes['real']]).toEqual(['', '', '']);
    expect(seen.notes['victim']).toBe('root secret');
  }, CASE_TIMEOUT_MS);

  it('names the errno and exits 71 on a full file system, leaving nothing behind', () => {
    const seen = asRootBesideAnAttacker(`
      mkdir /mnt/full && mount -t tmpfs -o size=64k,mode=0755 gpugate-test-full /mnt/full
      dd if=/dev/zero of=/mnt/full/filler bs=4k 2>/dev/null || true
      run full status --format prometheus --output /mnt/full/gpu.prom
      note listing ls -A /mnt/full
    `);
    const run = runOf(seen, 'full');
    expect(run.code).toBe(71);
    // The file the user named, never the temporary name it was being written under.
    expect(logText(run.stderr)).toMatch(/cannot write \/mnt\/full\/gpu\.prom: ENOSPC \(no space left on device\)/);
    expect(logText(run.stderr)).not.toMatch(/\.tmp/);
    expect(seen.notes['listing']).toBe('filler');
  }, CASE_TIMEOUT_MS);
});

describe('--report-file', () => {
  it('neither follows a planted symbolic link nor blocks on a planted FIFO; the exit code stays the gate\'s', () => {
    const seen = asRootBesideAnAttacker(`
      ${VICTIM}
      mkdir -m 1777 /mnt/shared
      $AS_NOBODY ln -s /mnt/victim /mnt/shared/report
      $AS_NOBODY mkfifo /mnt/shared/fifo
      run linked check --report-file /mnt/shared/report
      run fifo check --report-file /mnt/shared/fifo
      note victim cat /mnt/victim
      note link stat -c '%F %U' /mnt/shared/report
      note fifo stat -c '%F %U' /mnt/shared/fifo
    `);
    expect(runOf(seen, 'linked').code).toBe(0);
    expect(logText(runOf(seen, 'linked').stderr)).toContain('--report-file "/mnt/shared/report": cannot write: /mnt/shared/report is a symbolic link');
    expect(runOf(seen, 'fifo').code).toBe(0);
    expect(logText(runOf(seen, 'fifo').stderr)).toContain('--report-file "/mnt/shared/fifo": cannot write: /mnt/shared/fifo is a FIFO');
    expect(seen.notes).toMatchObject({ victim: 'root secret', link: 'symbolic link nobody', fifo: 'fifo nobody' });
  }, CASE_TIMEOUT_MS);

  it('writes into a bind-mounted file in place (as Kubernetes mounts /dev/termination-log), keeping its inode', () => {
    const seen = asRootBesideAnAttacker(`
      printf 'old text that is longer than the report\\n' > /mnt/host-log
      touch /mnt/termination-log && mount --bind /mnt/host-log /mnt/termination-log
      note before stat -c %i /mnt/host-log
      run report check --report-file /mnt/termination-log
      note after stat -c %i /mnt/host-log
      note text cat /mnt/host-log
    `);
    expect(runOf(seen, 'report').code).toBe(0);
    expect(seen.notes['after']).toBe(seen.notes['before']);
    expect(seen.notes['text']).toBe('GPUs 0 free');
    expect(seen.notes['text']).not.toContain('old text');
  }, CASE_TIMEOUT_MS);
});

describe('the lease directory', () => {
  it('refuses a GPUGATE_LEASE_DIR that an unprivileged user made a symbolic link, and a FIFO planted as .lock, at once (exit 77), writing nothing', () => {
    const seen = asRootBesideAnAttacker(`
      mkdir -m 1777 /mnt/shared && mkdir /mnt/root-only
      $AS_NOBODY ln -s /mnt/root-only /mnt/shared/leases
      GPUGATE_LEASE_DIR=/mnt/shared/leases run linked select --count 1
      $AS_NOBODY mkdir /mnt/shared/theirs && $AS_NOBODY mkfifo /mnt/shared/theirs/.lock
      GPUGATE_LEASE_DIR=/mnt/shared/theirs run their-dir select --count 1
      mkdir -m 1777 /mnt/sticky-leases && $AS_NOBODY mkfifo /mnt/sticky-leases/.lock
      GPUGATE_LEASE_DIR=/mnt/sticky-leases run fifo select --count 1
      note root-only ls -A /mnt/root-only
      note sticky ls -A /mnt/sticky-leases
    `);
    const linked = runOf(seen, 'linked');
    expect(linked.code).toBe(77);
    expect(logText(linked.stderr)).toContain('lease: /mnt/shared/leases is not a plain directory but a symbolic link');
    expect(runOf(seen, 'their-dir').code).toBe(77);
    expect(logText(runOf(seen, 'their-dir').stderr)).toContain('lease: /mnt/shared/theirs is owned by uid 65534');
    expect(runOf(seen, 'fifo').code).toBe(77);
    expect(logText(runOf(seen, 'fifo').stderr)).toContain('lease: /mnt/sticky-leases/.lock is a FIFO, not a regular file');
    for (const name of ['linked', 'their-dir', 'fifo']) expect(runOf(seen, name).stdout, name).toBe('');
    expect(seen.notes['root-only']).toBe('');
    expect(seen.notes['sticky']).toBe('.lock');
  }, CASE_TIMEOUT_MS);

  it('keeps its lock private to root (0600): an unprivileged user can neither open it nor, through an older 0644 lock, hold it', () => {
    const seen = asRootBesideAnAttacker(`
      mkdir -m 1777 /mnt/marks
      GPUGATE_LEASE_DIR=/mnt/leases run first select --count 1
      note mode stat -c '%a %U %F' /mnt/leases/.lock
      note opened sh -c "$AS_NOBODY flock --nonblock --shared /mnt/leases/.lock true && echo yes || echo no"
      # A lock file as an older gpugate left it, held by the unprivileged user through a read-only descriptor.
      mkdir /mnt/old-leases && touch /mnt/old-leases/.lock && chmod 0644 /mnt/old-leases/.lock
      note old-inode stat -c %i /mnt/old-leases/.lock
      $AS_NOBODY flock --shared /mnt/old-leases/.lock sh -c 'echo $$ > /mnt/marks/holding.tmp && mv /mnt/marks/holding.tmp /mnt/marks/holding && exec sleep 60' < /dev/null > /dev/null 2>&1 &
      HOLDER=$!
      for i in $(seq 1 100); do test -e /mnt/marks/holding && break; sleep 0.1; done
      note holding ls /mnt/marks
      GPUGATE_LEASE_DIR=/mnt/old-leases run old select --count 1
      note new-mode stat -c '%a %U' /mnt/old-leases/.lock
      note new-inode stat -c %i /mnt/old-leases/.lock
      kill "$(cat /mnt/marks/holding)"; wait $HOLDER || true
    `);
    expect(runOf(seen, 'first').code, runOf(seen, 'first').stderr).toBe(0);
    expect(seen.notes['mode']).toBe('600 root regular empty file');
    expect(seen.notes['opened']).toMatch(/Permission denied[\s\S]*no$/);
    expect(seen.notes['holding']).toBe('holding');
    const old = runOf(seen, 'old');
    expect(old.code, old.stderr).toBe(0);
    expect(old.stdout).toMatch(/^CUDA_VISIBLE_DEVICES=GPU-/);
    expect(seen.notes['new-mode']).toBe('600 root');
    expect(seen.notes['new-inode']).not.toBe(seen.notes['old-inode']);
  }, CASE_TIMEOUT_MS);

  it('exits 71 naming ENOSPC on a full file system and EROFS on a read-only one, never "internal error" nor advice to run as root', () => {
    const seen = asRootBesideAnAttacker(`
      mkdir /mnt/full && mount -t tmpfs -o size=64k,mode=0755 gpugate-test-full /mnt/full
      dd if=/dev/zero of=/mnt/full/filler bs=4k 2>/dev/null || true
      GPUGATE_LEASE_DIR=/mnt/full/leases run full select --count 1
      mkdir /mnt/ro && mount -t tmpfs -o mode=0755 gpugate-test-ro /mnt/ro && mkdir /mnt/ro/leases && mount -o remount,ro /mnt/ro
      GPUGATE_LEASE_DIR=/mnt/ro/leases run read-only select --count 1 --json
      note full-listing ls -A /mnt/full/leases
    `);
    const full = runOf(seen, 'full');
    expect(full.code, full.stderr).toBe(71);
    // The lease directory and the lease being written, never the random name of a temporary file.
    expect(logText(full.stderr)).toMatch(/lease: the lease directory \/mnt\/full\/leases cannot be used: cannot write \/mnt\/full\/leases\/GPU-[^ ]*\.lease: ENOSPC \(no space left on device\)/);
    expect(logText(full.stderr)).not.toMatch(/\.tmp\b/);
    expect(full.stdout).toBe('');
    // The lock file only: no partial lease, no temporary file.
    expect(seen.notes['full-listing']).toBe('.lock');
    const readOnly = runOf(seen, 'read-only');
    expect(readOnly.code, readOnly.stderr).toBe(71);
    expect(logText(readOnly.stderr)).toContain('EROFS (read-only file system)');
    expect(JSON.parse(readOnly.stdout)).toMatchObject({ result: 'os-error', exitCode: 71 });
    for (const run of [full, readOnly]) {
      expect(logText(run.stderr)).not.toMatch(/internal error|run as root/);
    }
  }, CASE_TIMEOUT_MS);

  it('tells a user who may not write the lease directory to run as root (exit 77), naming the errno', () => {
    const seen = asRootBesideAnAttacker(`
      eval "$UNPRIVILEGED_GPUGATE"
      mkdir -p /mnt/run/leases
      GPUGATE_LEASE_DIR=/mnt/run/leases AS="$AS_NOBODY" run unprivileged select --count 1
      note listing ls -A /mnt/run/leases
    `);
    const run = runOf(seen, 'unprivileged');
    expect(run.code, run.stderr).toBe(77);
    // The lease directory, the lock being made in it, and what the directory must be; never the random name of a temporary file.
    expect(logText(run.stderr)).toMatch(/lease: the lease directory \/mnt\/run\/leases cannot be used: cannot create \/mnt\/run\/leases\/\.lock: EACCES \(permission denied\) \(gpugate runs as uid 65534, not root\) \(expected: a directory gpugate's uid 65534 may write, owned by root or uid 65534, not writable by other users unless sticky\) \(run as root, or point GPUGATE_LEASE_DIR at a directory you may write\)/);
    expect(logText(run.stderr)).not.toMatch(/\.tmp\b/);
    expect(seen.notes['listing']).toBe('');
  }, CASE_TIMEOUT_MS);
});

describe('systemd --write', () => {
  it('refuses a root whose etc/systemd/system an unprivileged user made a symbolic link (exit 77), writing nothing there', () => {
    const seen = asRootBesideAnAttacker(`
      mkdir -p /mnt/root/etc && mkdir -m 1777 /mnt/root/etc/systemd && mkdir /mnt/elsewhere
      $AS_NOBODY ln -s /mnt/elsewhere /mnt/root/etc/systemd/system
      run linked systemd --unit llm --unit-path "$UNITS" --write --root /mnt/root
      note elsewhere ls -A /mnt/elsewhere
      rm /mnt/root/etc/systemd/system && mkdir /mnt/root/etc/systemd/system
      run real systemd --unit llm --unit-path "$UNITS" --write --root /mnt/root
      note written stat -c '%a %U' /mnt/root/etc/systemd/system/llm.service.d/gpugate.conf
    `);
    const linked = runOf(seen, 'linked');
    expect(linked.code).toBe(77);
    expect(logText(linked.stderr)).toContain('/mnt/root/etc/systemd/system is not a plain directory but a symbolic link');
    expect(seen.notes['elsewhere']).toBe('');
    expect(runOf(seen, 'real').code, runOf(seen, 'real').stderr).toBe(0);
    expect(seen.notes['written']).toBe('644 root');
  }, CASE_TIMEOUT_MS);
});

it('leaves no folder of its own behind', () => {
  expect(existsSync(work)).toBe(true);
  expect(readdirSync(work)).toEqual([]);
});
