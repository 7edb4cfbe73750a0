/**
 * --clean-shm removes only what nobody uses, decided by file identity (device and inode) and
 * never by name: real files on a real tmpfs, held open or mapped by real processes through a
 * hardlink, a bind-mount alias (in a private mount namespace), a name ending in " (deleted)",
 * a name with a newline, a name that is not UTF-8; and processes that exit while they are read.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, linkSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cleanShm, fileNameText, findLeakedShm } from '../../src/host/shm';
import { scanOpenFiles } from '../../src/host/proc-open-files';
import { listPids, parseMapsIdentities } from '../../src/host/procfs';
import { mirrorProcRoot } from '../helpers/proc-root';
import { cliEnv, cliPath } from '../helpers/cli';
import { repoRoot, simDevice, writeScenario } from '../helpers/sim';
import { makeTestTempDir } from '../helpers/temp-root';

const dirs: string[] = [];
const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(prefix: string): string {
  const dir = makeTestTempDir(prefix);
  dirs.push(dir);
  return dir;
}

/**
 * A real python process holding `file` (a path as bytes) open (fd) or mapped with its fd
 * closed (maps). Resolves with its pid once the file is held.
 */
async function holdFile(file: Buffer, how: 'fd' | 'maps'): Promise<number> {
  const code =
    how === 'fd'
      ? `import sys, time\nf = open(bytes.fromhex(sys.argv[1]), 'rb')\nprint('ready', flush=True)\ntime.sleep(120)\n`
      : `import mmap, os, sys, time\nfd = os.open(bytes.fromhex(sys.argv[1]), os.O_RDWR)\nm = mmap.mmap(fd, 4096)\nos.close(fd)\nprint('ready', flush=True)\ntime.sleep(120)\n`;
  const child = spawn('python3', ['-c', code, file.toString('hex')], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (status) => reject(new Error(`holder exited with ${status}`)));
  });
  return child.pid!;
}

const bytes = (text: string): Buffer => Buffer.from(text, 'utf8');

/** The results of a clean as [name, result] pairs. */
function outcome(results: Array<{ path: string; result: string }>): Array<[string, string]> {
  return results.map((r) => [path.basename(r.path), r.result]);
}

describe('in use means the same file, by any name', () => {
  it('keeps a file held open through a hardlink outside the shm directory', async () => {
    const shm = tempDir('gpugate-shm-');
    const elsewhere = tempDir('gpugate-shm-alias-');
    writeFileSync(path.join(shm, 'nccl-linked'), Buffer.alloc(4096));
    writeFileSync(path.join(shm, 'nccl-free'), Buffer.alloc(4096));
    linkSync(path.join(shm, 'nccl-linked'), path.join(elsewhere, 'other-name'));
    const holder = await holdFile(bytes(path.join(elsewhere, 'other-name')), 'fd');
    const proc = mirrorProcRoot([process.pid, holder]);
    dirs.push(proc.root);
    const report = await findLeakedShm({ shmRoot: shm, procRoot: proc.root });
    expect(report.leaked.map((e) => e.name)).toEqual(['nccl-free']);
    const results = await cleanShm(['nccl-*'], { shmRoot: shm, procRoot: proc.root });
    expect(outcome(results)).toEqual([
      ['nccl-free', 'removed'],
      ['nccl-linked', 'skipped'],
    ]);
    expect(existsSync(path.join(shm, 'nccl-linked'))).toBe(true);
  });

  it('keeps an open file whose real name ends in " (deleted)", and that name shields no other file', async () => {
    const shm = tempDir('gpugate-shm-');
    writeFileSync(path.join(shm, 'nccl-x (deleted)'), Buffer.alloc(4096));
    writeFileSync(path.join(shm, 'nccl-x'), Buffer.alloc(4096));
    const holder = await holdFile(bytes(path.join(shm, 'nccl-x (deleted)')), 'fd');
    const proc = mirrorProcRoot([process.pid, holder]);
    dirs.push(proc.root);
    const results = await cleanShm(['nccl-*'], { shmRoot: shm, procRoot: proc.root });
    expect(outcome(results)).toEqual([
      ['nccl-x', 'removed'],
      ['nccl-x (deleted)', 'skipped'],
    ]);
  });

  it('keeps a mapped file whose name contains a newline (written \\012 in maps)', async () => {
    const shm = tempDir('gpugate-shm-');
    const name = 'nccl-line\nbreak';
    writeFileSync(path.join(shm, name), Buffer.alloc(4096));
    const holder = await holdFile(bytes(path.join(shm, name)), 'maps');
    const proc = mirrorProcRoot([process.pid, holder]);
    dirs.push(proc.root);
    const results = await cleanShm(['nccl-*'], { shmRoot: shm, procRoot: proc.root });
    expect(results).toEqual([expect.objectContaining({ result: 'skipped', reason: 'a live process has it open or mapped' })]);
    // Reported with the newline escaped, so a log line stays one line.
    expect(results[0]!.path).toBe(path.join(shm, 'nccl-line\\x0abreak'));
    expect(existsSync(path.join(shm, name))).toBe(true);
  });

  it('reports names that are not UTF-8 escaped, keeps a held one and removes an unused one by identity', async () => {
    const shm = tempDir('gpugate-shm-');
    const held = Buffer.concat([bytes(`${shm}/nccl-`), Buffer.from([0xff, 0xfe]), bytes('-held')]);
    const unused = Buffer.concat([bytes(`${shm}/nccl-`), Buffer.from([0xc3, 0x28])]);
    writeFileSync(held, Buffer.alloc(4096));
    writeFileSync(unused, Buffer.alloc(4096));
    const holder = await holdFile(held, 'maps');
    const proc = mirrorProcRoot([process.pid, holder]);
    dirs.push(proc.root);
    const report = await findLeakedShm({ shmRoot: shm, procRoot: proc.root });
    expect(report.leaked.map((e) => e.name)).toEqual(['nccl-\\xc3(']);
    // A report's entries can be cleaned: the escaped name finds the file again.
    const results = await cleanShm(report.leaked, { shmRoot: shm, procRoot: proc.root });
    expect(outcome(results)).toEqual([['nccl-\\xc3(', 'removed']]);
    const left = readdirSync(shm, { encoding: 'buffer' });
    expect(left.map((n) => fileNameText(n))).toEqual(['nccl-\\xff\\xfe-held']);
  });

  it('names are escaped reversibly: backslashes and control characters too', () => {
    expect(fileNameText(bytes('plain-name'))).toBe('plain-name');
    expect(fileNameText(bytes('a\\x41'))).toBe('a\\\\x41');
    expect(fileNameText(Buffer.from([0x61, 0x41]))).toBe('aA');
    expect(fileNameText(bytes('esc\u001b[31m'))).toBe('esc\\x1b[31m');
    expect(fileNameText(bytes('ü'))).toBe('ü');
    // A C1 control character and the lone byte of the same value are different names.
    expect(fileNameText(bytes('a\u0085'))).toBe('a\\u{85}');
    expect(fileNameText(Buffer.from([0x61, 0x85]))).toBe('a\\x85');
  });

  it('reads the device and inode columns of maps (major:minor in hex)', () => {
    const text = [
      '7f0000000000-7f0000001000 rw-s 00000000 00:1a 12345                      /dev/shm/nccl-a (deleted)',
      '7f0000001000-7f0000002000 r--p 00000000 fd:01 987654321                  /usr/lib/x.so',
      '7f0000002000-7f0000003000 rw-p 00000000 00:00 0 ',
      '7ffd00000000-7ffd00001000 rw-p 00000000 00:00 0                          [stack]',
    ].join('\n');
    expect(parseMapsIdentities(text)).toEqual(['0:26:12345', '253:1:987654321']);
  });
});

/** Runs `script` as root in a private mount namespace (mounts vanish with it); returns stdout. */
function inMountNamespace(script: string): string {
  const run = spawnSync('unshare', ['--mount', '--propagation', 'private', 'sh', '-euc', script], { encoding: 'utf8', timeout: 30_000 });
  if (run.status !== 0) throw new Error(`unshare failed (${run.status}): ${run.stderr}`);
  return run.stdout;
}

describe('a bind-mount alias of the shm directory', () => {
  it('keeps a file on a private tmpfs held open through a bind mount of that tmpfs', () => {
    const work = tempDir('gpugate-shm-bind-');
    const shm = path.join(work, 'shm');
    const alias = path.join(work, 'alias');
    mkdirSync(shm);
    mkdirSync(alias);
    const shmModule = path.join(repoRoot(), 'dist', 'host', 'shm.js');
    const judge = `
      const { cleanShm } = require(${JSON.stringify(shmModule)});
      const holder = Number(process.argv[1]);
      cleanShm(['nccl-*'], { shmRoot: ${JSON.stringify(shm)}, pids: [process.pid, holder] })
        .then((r) => console.log(JSON.stringify(r.map((x) => [x.path.split('/').pop(), x.result]))));`;
    const out = inMountNamespace(`
      mount -t tmpfs -o size=1m gpugate-test ${shm}
      mount --bind ${shm} ${alias}
      head -c 4096 /dev/zero > ${shm}/nccl-bound
      head -c 4096 /dev/zero > ${shm}/nccl-free
      python3 -c 'import sys, time
f = open(sys.argv[1], "rb")
print("ready", flush=True)
time.sleep(60)' ${alias}/nccl-bound > ${work}/ready &
      holder=$!
      while [ ! -s ${work}/ready ]; do sleep 0.05; done
      ${JSON.stringify(process.execPath)} -e ${shellQuote(judge)} $holder
      kill $holder
      ls ${shm}`);
    const [json, ...left] = out.trim().split('\n');
    expect(JSON.parse(json!)).toEqual([
      ['nccl-bound', 'skipped'],
      ['nccl-free', 'removed'],
    ]);
    expect(left).toEqual(['nccl-bound']);
  });
});

describe('gpugate check --clean-shm, end to end', () => {
  it('on a private /dev/shm in new mount and PID namespaces, names the files held by any name, and removes none: outside processes are unseen', () => {
    const work = tempDir('gpugate-shm-cli-');
    const alias = path.join(work, 'alias');
    mkdirSync(alias);
    const scenario = writeScenario({ devices: [simDevice(0)] });
    // The namespace's own procfs lists only its processes: the held files are found by identity,
    // but a process outside the namespace could hold the free one unseen, so nothing is removed.
    const run = spawnSync(
      'unshare',
      ['--mount', '--propagation', 'private', '--pid', '--fork', '--mount-proc', 'sh', '-euc', `
        mount -t tmpfs -o size=4m gpugate-test /dev/shm
        mount --bind /dev/shm ${alias}
        mkdir /dev/shm/elsewhere
        for name in nccl-held nccl-linked nccl-free; do head -c 8192 /dev/zero > /dev/shm/$name; done
        ln /dev/shm/nccl-linked /dev/shm/elsewhere/other-name
        python3 -c 'import sys, time
a = open(sys.argv[1], "rb")
b = open(sys.argv[2], "rb")
print("ready", flush=True)
time.sleep(60)' ${alias}/nccl-held /dev/shm/elsewhere/other-name > ${work}/ready &
        holder=$!
        trap 'kill $holder' EXIT
        while [ ! -s ${work}/ready ]; do sleep 0.05; done
        ${JSON.stringify(process.execPath)} ${cliPath()} check --clean-shm 'nccl-*' --json
        ls /dev/shm`],
      { encoding: 'utf8', env: cliEnv(scenario), timeout: 60_000 },
    );
    expect(run.status, run.stderr).toBe(0);
    const lines = run.stdout.trim().split('\n');
    const json = JSON.parse(lines[0]!) as { exitCode: number; actions: { shm: Array<{ path: string; result: string; reason: string }> } };
    expect(json.exitCode).toBe(0);
    expect(json.actions.shm.map((r) => [r.path, r.result, r.reason])).toEqual([
      ['/dev/shm/nccl-free', 'skipped', expect.stringMatching(/^cannot prove it unused: gpugate runs in a nested PID namespace/)],
      ['/dev/shm/nccl-held', 'skipped', 'a live process has it open or mapped'],
      ['/dev/shm/nccl-linked', 'skipped', 'a live process has it open or mapped'],
    ]);
    expect(lines.slice(1).sort()).toEqual(['elsewhere', 'nccl-free', 'nccl-held', 'nccl-linked']);
  });
});

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/** A C program whose main thread exits (a zombie leader) while a second thread holds argv[1] open and argv[2] mapped. */
const ZOMBIE_LEADER_C = `
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
static void* linger(void* unused) { (void)unused; sleep(60); return NULL; }
int main(int argc, char** argv) {
  if (argc < 3) return 2;
  int held = open(argv[1], O_RDONLY);
  int mapped = open(argv[2], O_RDWR);
  if (held < 0 || mapped < 0) return 3;
  if (mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, mapped, 0) == MAP_FAILED) return 4;
  close(mapped);
  pthread_t thread;
  if (pthread_create(&thread, NULL, linger, NULL) != 0) return 5;
  printf("ready\\n");
  fflush(stdout);
  pthread_exit(NULL);
}
`;

describe('a thread-group leader that exited while its threads run', () => {
  it('still holds what its live threads hold open or mapped', async () => {
    const work = tempDir('gpugate-shm-zombie-');
    const source = path.join(work, 'zombie-leader.c');
    const binary = path.join(work, 'zombie-leader');
    writeFileSync(source, ZOMBIE_LEADER_C);
    const built = spawnSync('cc', ['-O2', '-Wall', '-o', binary, source, '-lpthread'], { encoding: 'utf8' });
    expect(built.status, built.stderr).toBe(0);
    const shm = tempDir('gpugate-shm-');
    for (const name of ['nccl-open', 'nccl-mapped', 'nccl-free']) writeFileSync(path.join(shm, name), Buffer.alloc(4096));
    const child = spawn(binary, [path.join(shm, 'nccl-open'), path.join(shm, 'nccl-mapped')], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(child);
    await new Promise<void>((resolve, reject) => {
      child.stdout!.once('data', () => resolve());
      child.once('exit', (status) => reject(new Error(`zombie-leader exited with ${status}`)));
    });
    const pid = child.pid!;
    // The leader is a zombie now: /proc/PID shows neither its descriptors nor its mappings.
    for (let i = 0; i < 200 && !readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z '); i += 1) await new Promise((r) => setTimeout(r, 10));
    expect(readFileSync(`/proc/${pid}/stat`, 'utf8')).toContain(') Z ');
    expect(readFileSync(`/proc/${pid}/maps`, 'utf8')).toBe('');
    const proc = mirrorProcRoot([process.pid, pid]);
    dirs.push(proc.root);
    const results = await cleanShm(['nccl-*'], { shmRoot: shm, procRoot: proc.root });
    expect(outcome(results)).toEqual([
      ['nccl-free', 'removed'],
      ['nccl-mapped', 'skipped'],
      ['nccl-open', 'skipped'],
    ]);
  });
});

describe('processes that exit while they are read', () => {
  it('a pid that vanished between its two reads holds nothing and does not block the clean-up', async () => {
    const shm = tempDir('gpugate-shm-');
    writeFileSync(path.join(shm, 'nccl-a'), Buffer.alloc(4096));
    // The state a scan meets when a process exits mid-read: its fd list was read, its maps are gone.
    const exited = spawnSync('true').pid;
    const proc = mirrorProcRoot([process.pid]);
    dirs.push(proc.root);
    const caught = path.join(proc.root, '999999');
    mkdirSync(caught);
    symlinkSync(`/proc/${process.pid}/fd`, path.join(caught, 'fd'));
    symlinkSync(`/proc/${exited}/maps`, path.join(caught, 'maps'));
    const scan = await scanOpenFiles(proc.root);
    expect(scan.map((e) => e.pid)).toEqual([process.pid]);
    const results = await cleanShm(['nccl-*'], { shmRoot: shm, procRoot: proc.root });
    expect(outcome(results)).toEqual([['nccl-a', 'removed']]);
  });

  it('a listed pid that has exited before it is read holds nothing (pids injected)', async () => {
    const shm = tempDir('gpugate-shm-');
    writeFileSync(path.join(shm, 'nccl-a'), Buffer.alloc(4096));
    const exited = spawnSync('true').pid;
    const results = await cleanShm(['nccl-*'], { shmRoot: shm, pids: [process.pid, exited] });
    expect(outcome(results)).toEqual([['nccl-a', 'removed']]);
  });

  it('never refuses because of real short-lived processes exiting during the scan', async () => {
    const shm = tempDir('gpugate-shm-');
    for (let round = 0; round < 5; round += 1) {
      writeFileSync(path.join(shm, `nccl-${round}`), Buffer.alloc(4096));
      // A shell forking a bounded burst of short-lived children while the scan runs (bounded, so
      // the pid space does not wrap under other tests' feet).
      const churn = spawn('sh', ['-c', 'i=0; while [ $i -lt 60 ]; do /bin/true; i=$((i+1)); done'], { stdio: 'ignore' });
      children.push(churn);
      const churned = new Promise((resolve) => churn.once('exit', resolve));
      // Every pid but PID 1, whose files this sandbox may hide: the churn's children come and go.
      const pids = (await listPids('/proc')).filter((pid) => pid !== 1);
      const results = await cleanShm([`nccl-${round}`], { shmRoot: shm, pids });
      expect(results.map((r) => [r.result, r.reason])).toEqual([['removed', 'unowned leftover']]);
      await churned;
    }
  });

  it('a process that exists but whose files cannot be read still blocks removal', async () => {
    const shm = tempDir('gpugate-shm-');
    writeFileSync(path.join(shm, 'nccl-a'), Buffer.alloc(4096));
    const proc = mirrorProcRoot([process.pid]);
    dirs.push(proc.root);
    // A live process whose fd "directory" cannot be listed (ENOTDIR), its stat still there.
    const hidden = path.join(proc.root, '999998');
    mkdirSync(hidden);
    writeFileSync(path.join(hidden, 'fd'), '');
    symlinkSync(`/proc/${process.pid}/stat`, path.join(hidden, 'stat'));
    symlinkSync(`/proc/${process.pid}/maps`, path.join(hidden, 'maps'));
    const results = await cleanShm(['nccl-*'], { shmRoot: shm, procRoot: proc.root });
    expect(results).toEqual([expect.objectContaining({ result: 'skipped', reason: expect.stringMatching(/cannot prove it unused.*pid 999998/) })]);
    expect(existsSync(path.join(shm, 'nccl-a'))).toBe(true);
  });
});
