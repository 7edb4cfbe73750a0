/**
 * A systemd 252 booted as PID 1 of namespaces made for one test (see boot-container.sh), driven
 * from outside with `nsenter` + systemctl. Everything it writes stays in a tmpfs upper layer or
 * in the state directory's shared/ (mounted at /e2e inside); close() kills its PID 1 (which ends
 * every process of its PID namespace), removes its cgroup and the state directory.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, rmdirSync, statfsSync, writeFileSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const CGROUP2_MAGIC = 0x63677270;

/** Why the suite cannot run here, or null when it can. */
export function cannotRunReason(): string | null {
  if (process.platform !== 'linux') return 'not Linux';
  if (typeof process.getuid === 'function' && process.getuid() !== 0) return 'needs root (it makes namespaces and mounts)';
  if (!existsSync('/lib/systemd/systemd')) return 'no /lib/systemd/systemd (install Debian\'s systemd package)';
  for (const tool of ['unshare', 'nsenter', 'pivot_root', 'setpriv', 'cc']) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) return `no ${tool} on PATH`;
  }
  if (cgroup2Root() === null) return 'no writable cgroup2 hierarchy (/sys/fs/cgroup or /sys/fs/cgroup/unified)';
  return null;
}

/** A writable cgroup2 mount of the host: the unified one of a hybrid host, or /sys/fs/cgroup. */
function cgroup2Root(): string | null {
  for (const dir of ['/sys/fs/cgroup/unified', '/sys/fs/cgroup']) {
    try {
      if (statfsSync(dir).type !== CGROUP2_MAGIC) continue;
      const probe = join(dir, `gpugate-e2e-probe-${process.pid}`);
      mkdirSync(probe);
      rmdirSync(probe);
      return dir;
    } catch {
      // not cgroup2, or read-only: try the next
    }
  }
  return null;
}

/** Removes a cgroup and its children, deepest first (they are empty once the namespace is dead). */
function removeCgroup(dir: string): void {
  if (!existsSync(dir)) return;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) removeCgroup(join(dir, entry.name));
  }
  for (let attempt = 0; attempt < 50; attempt += 1) {
    try {
      rmdirSync(dir);
      return;
    } catch {
      spawnSync('sleep', ['0.1']);
    }
  }
}

export interface RunResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

let counter = 0;

export class SystemdContainer {
  /** shared/ on the host = /e2e inside. */
  readonly shared: string;
  /** rootfs/ on the host, copied over / inside at boot. */
  readonly rootfs: string;
  private readonly state: string;
  private readonly cgroup: string;
  private unshare: ChildProcess | null = null;
  private initPid = 0;

  constructor() {
    this.state = mkdtempSync(join(tmpdir(), 'gpugate-e2e-'));
    this.shared = join(this.state, 'shared');
    this.rootfs = join(this.state, 'rootfs');
    for (const dir of ['layers', 'root', 'shared', 'rootfs']) mkdirSync(join(this.state, dir));
    chmodSync(this.shared, 0o755);
    counter += 1;
    this.cgroup = join(cgroup2Root() ?? '/nonexistent', `gpugate-e2e-${process.pid}-${counter}`);
  }

  /** Write a file into the root the container boots with (path absolute, as seen inside). */
  addFile(path: string, text: string, mode = 0o644): void {
    const file = join(this.rootfs, path);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, text);
    chmodSync(file, mode);
  }

  /** Copy a host file into the root the container boots with (/tmp inside is private). */
  addCopy(path: string, source: string, mode = 0o755): void {
    const file = join(this.rootfs, path);
    mkdirSync(dirname(file), { recursive: true });
    copyFileSync(source, file);
    chmodSync(file, mode);
  }

  addSymlink(path: string, target: string): void {
    const file = join(this.rootfs, path);
    mkdirSync(dirname(file), { recursive: true });
    symlinkSync(target, file);
  }

  /** Boot, and resolve once systemd reports the system running (or degraded). */
  async boot(bootScript: string, timeoutMs = 30_000): Promise<void> {
    mkdirSync(this.cgroup);
    const log = join(this.state, 'console.log');
    writeFileSync(log, '');
    // The shell moves itself into the test's cgroup, so the new cgroup namespace is rooted there.
    // If the test process dies without cleaning up, the parent-death signal ends unshare, and
    // --kill-child then ends the container's PID 1 (and with it everything inside).
    this.unshare = spawn(
      'sh',
      ['-c', 'echo $$ > "$1/cgroup.procs" && exec setpriv --pdeathsig KILL unshare --fork --pid --mount --uts --ipc --net --cgroup --kill-child "$2" "$3"', 'sh', this.cgroup, bootScript, this.state],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const chunks: string[] = [];
    this.unshare.stdout?.on('data', (d: Buffer) => chunks.push(d.toString()));
    this.unshare.stderr?.on('data', (d: Buffer) => chunks.push(d.toString()));
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (this.unshare.exitCode !== null) throw new Error(`the container exited (${this.unshare.exitCode}) before systemd ran:\n${chunks.join('')}`);
      if (this.initPid === 0) this.initPid = this.findInit();
      if (this.initPid !== 0) {
        const state = this.exec(['systemctl', 'is-system-running']).stdout.trim();
        if (state === 'running' || state === 'degraded') return;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`systemd did not reach running within ${timeoutMs} ms:\n${chunks.join('')}`);
  }

  private findInit(): number {
    const pid = this.unshare?.pid;
    if (pid === undefined) return 0;
    try {
      const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
      const init = children[0];
      if (init === undefined) return 0;
      return readFileSync(`/proc/${init}/comm`, 'utf8').trim() === 'systemd' ? init : 0;
    } catch {
      return 0;
    }
  }

  /** Run a command inside every namespace of the container. */
  exec(command: string[], timeoutMs = 30_000): RunResult {
    const result = spawnSync('nsenter', ['-t', String(this.initPid), '-a', ...command], { encoding: 'utf8', timeout: timeoutMs, env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C.UTF-8' } });
    return { status: result.status, stdout: result.stdout ?? '', stderr: result.stderr ?? '' };
  }

  systemctl(...args: string[]): RunResult {
    return this.exec(['systemctl', '--no-pager', ...args]);
  }

  /** `systemctl show -p NAME --value` for a few properties. */
  show(unit: string, ...properties: string[]): Record<string, string> {
    const out = this.systemctl('show', unit, ...properties.map((p) => `-p${p}`)).stdout;
    const values: Record<string, string> = {};
    for (const line of out.split('\n')) {
      const eq = line.indexOf('=');
      if (eq > 0) values[line.slice(0, eq)] = line.slice(eq + 1);
    }
    return values;
  }

  journal(unit: string): string {
    return this.exec(['journalctl', '--no-pager', '-o', 'short-monotonic', '-u', unit]).stdout;
  }

  /** Kill the namespace's PID 1 (and with it every process inside), remove the cgroup and files. */
  async close(): Promise<void> {
    if (this.initPid !== 0) {
      try {
        process.kill(this.initPid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    const child = this.unshare;
    if (child !== null && child.exitCode === null && child.signalCode === null) {
      if (this.initPid === 0) child.kill('SIGKILL');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          child.kill('SIGKILL');
          resolve();
        }, 10_000);
        child.once('exit', () => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    removeCgroup(this.cgroup);
    rmSync(this.state, { recursive: true, force: true });
  }
}
