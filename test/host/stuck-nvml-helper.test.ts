/**
 * The finder of NVML helpers stuck in the kernel (src/host/stuck-nvml-helper.ts) over prepared
 * procfs trees: a helper is recognised by its exe link alone, only state D counts, its command
 * line's state is parsed strictly, and hostile or vanishing entries are counted, never thrown.
 * (A real process in state D is found in test/host/stuck-driver.test.ts.)
 */
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { findStuckNvmlHelpers, parseHelperState } from '../../src/host/stuck-nvml-helper';
import { makeStat, ProcRoot } from '../helpers/proc-root';

const HELPER = '/opt/gpugate/build/Release/gpugate-nvml-helper';
const STATE = 'gpugate-nvml-helper in nvmlDeviceGetMemoryInfo_v2 gpu 3 since 1796158800123';
const STATUS = 'Name:\tgpugate-nvml-he\nState:\tD (disk sleep)\nUid:\t0\t0\t0\t0\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n';

const roots: ProcRoot[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) root.remove();
});

interface Entry {
  pid: number;
  /** exe link text; null: no link (a kernel thread); 'directory': an exe that is not a link. */
  exe: string | null | 'directory';
  state?: string;
  comm?: string;
  cmdline?: string;
  wchan?: string;
  status?: string;
  /** Leave out the stat file: the process exited between the listing and the read. */
  vanished?: boolean;
  stat?: string;
}

function procTree(entries: Entry[]): string {
  const proc = new ProcRoot();
  roots.push(proc);
  for (const entry of entries) {
    proc.add({
      pid: entry.pid,
      ...(entry.vanished === true ? {} : { stat: entry.stat ?? makeStat(entry.pid, entry.comm ?? 'gpugate-nvml-he', { 3: entry.state ?? 'D', 22: 4242 }) }),
      status: entry.status ?? STATUS,
      cmdline: entry.cmdline ?? `${STATE}\0`,
    });
    const dir = path.join(proc.root, String(entry.pid));
    if (entry.exe === 'directory') mkdirSync(path.join(dir, 'exe'));
    else if (entry.exe !== null) symlinkSync(entry.exe, path.join(dir, 'exe'));
    if (entry.wchan !== undefined) writeFileSync(path.join(dir, 'wchan'), entry.wchan);
  }
  return proc.root;
}

describe('parseHelperState', () => {
  it('reads the contract form, as one argument or as several', () => {
    const expected = { kind: 'in', call: { fn: 'nvmlDeviceGetMemoryInfo_v2', gpu: 3, sinceUnixMs: 1796158800123 } };
    expect(parseHelperState([STATE])).toEqual(expected);
    expect(parseHelperState(STATE.split(' '))).toEqual(expected);
    expect(parseHelperState(['gpugate-nvml-helper in nvmlInit_v2 gpu - since 17'])).toEqual({ kind: 'in', call: { fn: 'nvmlInit_v2', gpu: null, sinceUnixMs: 17 } });
    expect(parseHelperState(['gpugate-nvml-helper idle'])).toEqual({ kind: 'idle' });
  });

  it('names anything else unknown, keeping its text', () => {
    for (const text of [
      'gpugate-nvml-helper',
      '/usr/bin/gpugate-nvml-helper idle',
      'gpugate-nvml-helper in nvmlInit_v2 gpu 0',
      'gpugate-nvml-helper in nvml;rm -rf / gpu 0 since 1',
      'gpugate-nvml-helper in nvmlInit_v2 gpu 0 since 1\nforged line',
      'gpugate-nvml-helper in nvmlInit_v2 gpu 0 since 99999999999999999999',
      'gpugate-nvml-helper in nvmlInit_v2 gpu 1.5 since 1',
      'gpugate-nvml-helper  idle',
      'sleep 600',
    ]) {
      expect(parseHelperState(text.split('\0')), text).toEqual({ kind: 'unknown', text: text.trim() });
    }
    // NULs inside the state make empty words: not the contract's form.
    expect(parseHelperState(['gpugate-nvml-helper', '', 'idle']).kind).toBe('unknown');
  });
});

describe('findStuckNvmlHelpers over a prepared /proc', () => {
  it('reports a helper in state D with its pid, start time, wchan, call and owner', async () => {
    const root = procTree([{ pid: 4100, exe: HELPER, wchan: 'rpc_wait_for_response' }]);
    const scan = await findStuckNvmlHelpers(HELPER, root);
    expect(scan).toEqual({
      stuck: [{
        pid: 4100, startTimeTicks: 4242, wchan: 'rpc_wait_for_response', uid: 0, killPending: false, fileReplaced: false,
        state: { kind: 'in', call: { fn: 'nvmlDeviceGetMemoryInfo_v2', gpu: 3, sinceUnixMs: 1796158800123 } },
      }],
      running: 0,
      unreadable: 0,
    });
  });

  it('counts a helper in any other state as running, and ignores every other executable', async () => {
    const root = procTree([
      { pid: 10, exe: HELPER, state: 'S', cmdline: 'gpugate-nvml-helper idle\0' },
      { pid: 11, exe: HELPER, state: 'R' },
      // The same command line and comm, another file: not a helper.
      { pid: 12, exe: '/tmp/gpugate-nvml-helper' },
      { pid: 13, exe: `${HELPER}.old` },
      { pid: 14, exe: HELPER.slice(1) },
    ]);
    expect(await findStuckNvmlHelpers(HELPER, root)).toEqual({ stuck: [], running: 2, unreadable: 0 });
  });

  it('takes a replaced helper file (" (deleted)") as the helper of an earlier install at that path', async () => {
    const root = procTree([{ pid: 20, exe: `${HELPER} (deleted)` }, { pid: 21, exe: `${HELPER} (deleted) (deleted)` }]);
    const scan = await findStuckNvmlHelpers(HELPER, root);
    expect(scan.stuck.map((helper) => [helper.pid, helper.fileReplaced])).toEqual([[20, true]]);
  });

  it('splits stat at the last parenthesis: a comm holding ") D (" does not make a sleeping process stuck', async () => {
    const root = procTree([
      { pid: 30, exe: HELPER, comm: 'x) D (y', state: 'S' },
      { pid: 31, exe: HELPER, comm: ') S (', state: 'D' },
    ]);
    const scan = await findStuckNvmlHelpers(HELPER, root);
    expect(scan.stuck.map((helper) => helper.pid)).toEqual([31]);
    expect(scan.running).toBe(1);
  });

  it('reads a pending SIGKILL from the thread\'s or the shared pending set', async () => {
    const status = (sigPnd: string, shdPnd: string): string => STATUS.replace('SigPnd:\t0000000000000000', `SigPnd:\t${sigPnd}`).replace('ShdPnd:\t0000000000000000', `ShdPnd:\t${shdPnd}`);
    const root = procTree([
      { pid: 40, exe: HELPER, status: status('0000000000000100', '0000000000000000') },
      { pid: 41, exe: HELPER, status: status('0000000000000000', '0000000000000100') },
      // SIGTERM (bit 14) and SIGHUP are not SIGKILL; a malformed mask is nothing.
      { pid: 42, exe: HELPER, status: status('0000000000004001', 'zz00000000000100') },
    ]);
    const scan = await findStuckNvmlHelpers(HELPER, root);
    expect(scan.stuck.map((helper) => [helper.pid, helper.killPending])).toEqual([[40, true], [41, true], [42, false]]);
  });

  it('keeps a stuck helper whose command line is hostile, missing or whose status is unreadable, with what is known', async () => {
    const root = procTree([
      { pid: 50, exe: HELPER, cmdline: 'gpugate-nvml-helper in nvmlInit_v2\0gpu 0 since 1\nforged\0', wchan: '0' },
      { pid: 51, exe: HELPER, cmdline: '', status: 'garbage without fields' },
    ]);
    rmSync(path.join(root, '50', 'wchan'), { force: true });
    const scan = await findStuckNvmlHelpers(HELPER, root);
    expect(scan.stuck).toEqual([
      { pid: 50, startTimeTicks: 4242, wchan: null, uid: 0, killPending: false, fileReplaced: false, state: { kind: 'unknown', text: 'gpugate-nvml-helper in nvmlInit_v2 gpu 0 since 1\nforged' } },
      { pid: 51, startTimeTicks: 4242, wchan: null, uid: null, killPending: false, fileReplaced: false, state: { kind: 'unknown', text: '' } },
    ]);
  });

  it('leaves out a process that vanished after the listing, and counts what cannot be read', async () => {
    const root = procTree([
      { pid: 60, exe: HELPER, vanished: true },
      { pid: 61, exe: HELPER, stat: '61 (gpugate-nvml-he) D not enough fields\n' },
      { pid: 62, exe: 'directory' },
      { pid: 63, exe: null },
      { pid: 64, exe: HELPER, wchan: 'percpu_rwsem_wait' },
    ]);
    // Not a process entry at all.
    writeFileSync(path.join(root, 'self'), '');
    const scan = await findStuckNvmlHelpers(HELPER, root);
    expect(scan.stuck.map((helper) => helper.pid)).toEqual([64]);
    // 61: a malformed stat; 62: an exe that is no link (EINVAL). 60 vanished and 63 (a kernel thread) are not counted.
    expect(scan.unreadable).toBe(2);
    expect(scan.running).toBe(0);
  });

  it('skips kthreadd and its children without asking each for an executable, once pid 2 is proven the kernel\'s', async () => {
    // pid 7 is made to look like a stuck helper: were it read, it would be reported. A real child
    // of kthreadd (a kernel thread or a user-mode helper of the kernel's) is never gpugate's helper.
    const kthreadd = (flags: number): string => {
      const root = procTree([{ pid: 2, exe: null, comm: 'kthreadd', stat: makeStat(2, 'kthreadd', { 4: 0, 9: flags }) }, { pid: 7, exe: HELPER }, { pid: 8, exe: HELPER }]);
      mkdirSync(path.join(root, '2', 'task', '2'), { recursive: true });
      writeFileSync(path.join(root, '2', 'task', '2', 'children'), '3 7 ');
      return root;
    };
    const kernel = await findStuckNvmlHelpers(HELPER, kthreadd(0x208040));
    expect(kernel.stuck.map((helper) => helper.pid)).toEqual([8]);
    // Without PF_KTHREAD, pid 2 is a process like any other (the first of another PID namespace,
    // named kthreadd or not): its children are read as every other process.
    const namespaced = await findStuckNvmlHelpers(HELPER, kthreadd(0x400100));
    expect(namespaced.stuck.map((helper) => helper.pid)).toEqual([7, 8]);
  });

  it('reads every process when the kernel has no children file', async () => {
    const root = procTree([{ pid: 2, exe: null, comm: 'kthreadd', stat: makeStat(2, 'kthreadd', { 4: 0, 9: 0x208040 }) }, { pid: 7, exe: HELPER }]);
    expect((await findStuckNvmlHelpers(HELPER, root)).stuck.map((helper) => helper.pid)).toEqual([7]);
  });

  it('counts a /proc that cannot be listed as one unreadable entry', async () => {
    const scan = await findStuckNvmlHelpers(HELPER, path.join(procTree([]), 'missing'));
    expect(scan).toEqual({ stuck: [], running: 0, unreadable: 1 });
  });
});
