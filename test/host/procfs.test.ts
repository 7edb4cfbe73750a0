import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { spawnSync } from 'node:child_process';
import {
  parseBootTime,
  parseCgroup,
  parseChildren,
  parseArgv,
  parseCmdline,
  parseMaps,
  parseMountinfo,
  parseNSpid,
  parseStat,
  readProcess,
  systemdCgroupPath,
  unitOfCgroup,
} from '../../src/host/procfs';
import { unitCgroupFromPath } from '../../src/gate/stale';

const SEED = { seed: 7, numRuns: 300 };

function statLine(pid: number, comm: string, state: string, ppid: number, flags: number, threads: number, start: number): string {
  // Fields 1..22 and a few more, as the kernel writes them.
  const after = [state, ppid, pid, pid, 0, -1, flags, 0, 0, 0, 0, 5, 3, 0, 0, 20, 0, threads, 0, start, 1000, 200, 'rest'];
  return `${pid} (${comm}) ${after.join(' ')}\n`;
}

describe('parseStat', () => {
  it('reads the fields gpugate uses', () => {
    const stat = parseStat(statLine(4242, 'VLLM::Worker_TP0', 'S', 1, 0x400140, 12, 987654));
    expect(stat).toEqual({ pid: 4242, comm: 'VLLM::Worker_TP0', state: 'S', ppid: 1, pgrp: 4242, flags: 0x400140, numThreads: 12, startTimeTicks: 987654 });
  });

  it('survives command names with spaces and parentheses (splits at the last ")")', () => {
    const stat = parseStat(statLine(7, 'a) b (c) Z 99', 'D', 3, 4, 1, 55));
    expect(stat.comm).toBe('a) b (c) Z 99');
    expect(stat.state).toBe('D');
    expect(stat.ppid).toBe(3);
    expect(stat.flags).toBe(4);
  });

  it('reads the real /proc/self/stat', async () => {
    const info = await readProcess(process.pid);
    expect(info.kind).toBe('ok');
    if (info.kind === 'ok') {
      expect(info.stat.pid).toBe(process.pid);
      expect(info.stat.ppid).toBe(process.ppid);
      expect(info.stat.startTimeTicks).toBeGreaterThan(0);
    }
  });

  it('rejects malformed lines with a message quoting them', () => {
    expect(() => parseStat('')).toThrow(/malformed/);
    expect(() => parseStat('12 (x) S 1')).toThrow(/at least 22 fields/);
    expect(() => parseStat('x (y) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20')).toThrow(/pid/);
  });

  it('round-trips any comm (up to 64 chars of any printable text) (property)', () => {
    fc.assert(
      fc.property(
        fc.nat(4_194_304),
        fc.string({ maxLength: 64, unit: fc.constantFrom('a', 'Z', ' ', '(', ')', ':', '-', '_', '9', 'é') }),
        fc.constantFrom('R', 'S', 'D', 'Z', 'T', 'I', 'X'),
        fc.nat(4_194_304),
        fc.nat(0x7fffffff),
        fc.integer({ min: 1, max: 5000 }),
        fc.nat(2 ** 40),
        (pid, comm, state, ppid, flags, threads, start) => {
          const stat = parseStat(statLine(pid, comm, state, ppid, flags, threads, start));
          expect(stat).toEqual({ pid, comm, state, ppid, pgrp: pid, flags, numThreads: threads, startTimeTicks: start });
        },
      ),
      SEED,
    );
  });

  it('never throws anything but a plain Error on arbitrary text (property)', () => {
    fc.assert(
      fc.property(fc.string(), (text) => {
        try {
          parseStat(text);
        } catch (error) {
          expect((error as Error).message).toMatch(/malformed/);
        }
      }),
      SEED,
    );
  });
});

describe('status, cgroup, maps, mountinfo, cmdline, btime', () => {
  it('children: the pids the kernel lists (with its trailing space), none for an empty file, the live file as it is', () => {
    expect(parseChildren('41 42 107 ')).toEqual([41, 42, 107]);
    expect(parseChildren('')).toEqual([]);
    // A child reads its parent's files (one per thread: whichever thread spawned it lists it).
    const child = spawnSync('sh', ['-c', 'cat /proc/$PPID/task/*/children'], { encoding: 'latin1' });
    expect(parseChildren(child.stdout)).toContain(child.pid);
  });
  it('NSpid: one id in the host namespace, several when nested', () => {
    expect(parseNSpid('Name:\tx\nNSpid:\t4242\n')).toEqual([4242]);
    expect(parseNSpid('Name:\tx\nNSpid:\t4242\t17\t1\n')).toEqual([4242, 17, 1]);
    expect(parseNSpid('Name:\tx\n')).toEqual([]);
  });

  it('cgroup: unified path first, systemd v1 name= path when unified is the root', () => {
    const v2 = parseCgroup('0::/system.slice/vllm.service\n');
    expect(v2).toEqual([{ hierarchyId: 0, controllers: [], path: '/system.slice/vllm.service' }]);
    expect(systemdCgroupPath(v2)).toBe('/system.slice/vllm.service');
    const hybrid = parseCgroup('12:memory:/x\n1:name=systemd:/system.slice/a:b.service\n0::/\n');
    expect(systemdCgroupPath(hybrid)).toBe('/system.slice/a:b.service');
    expect(systemdCgroupPath(parseCgroup('0::/\n'))).toBe('/');
    expect(systemdCgroupPath([])).toBeNull();
  });

  it('unit detection: a .service is a unit, login scopes, the user manager and the root are not', () => {
    expect(unitCgroupFromPath('/system.slice/vllm.service')).toBe('/system.slice/vllm.service');
    expect(unitCgroupFromPath('/user.slice/user-1000.slice/user@1000.service/app.slice/llm.service')).toBe('/user.slice/user-1000.slice/user@1000.service/app.slice/llm.service');
    expect(unitCgroupFromPath('/user.slice/user-1000.slice/session-3.scope')).toBeNull();
    expect(unitCgroupFromPath('/user.slice/user-1000.slice/user@1000.service')).toBeNull();
    expect(unitCgroupFromPath('/')).toBeNull();
    expect(unitCgroupFromPath(null)).toBeNull();
    expect(unitOfCgroup('/system.slice/vllm.service/worker')).toBe('vllm.service');
    expect(unitOfCgroup('/')).toBeNull();
  });

  it('maps: file paths including deleted ones, no anonymous or special regions', () => {
    const text = [
      '7f0000000000-7f0000001000 rw-s 00000000 00:05 1234                       /dev/nvidia0',
      '7f0000002000-7f0000003000 rw-s 00000000 00:19 99                         /dev/shm/nccl-abc (deleted)',
      '7f0000004000-7f0000005000 rw-p 00000000 00:00 0 ',
      '7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]',
      '7f0000006000-7f0000007000 r--p 00000000 08:01 555                        /usr/lib/x86_64-linux-gnu/lib with space.so',
    ].join('\n');
    expect(parseMaps(text)).toEqual(['/dev/nvidia0', '/dev/shm/nccl-abc (deleted)', '/usr/lib/x86_64-linux-gnu/lib with space.so']);
  });

  it('mountinfo: optional fields, escapes and super options', () => {
    const text = '22 27 0:21 / /proc rw,relatime shared:13 - proc proc rw,hidepid=2\n30 22 0:25 / /dev/shm\\040x rw - tmpfs tmpfs rw,size=65536k\n';
    const entries = parseMountinfo(text);
    expect(entries[0]).toMatchObject({ mountPoint: '/proc', fsType: 'proc', superOptions: ['rw', 'hidepid=2'] });
    expect(entries[1]).toMatchObject({ mountPoint: '/dev/shm x', fsType: 'tmpfs' });
  });

  it('cmdline and btime', () => {
    expect(parseCmdline('VLLM::Worker_TP6\u000060\u0000')).toBe('VLLM::Worker_TP6 60');
    expect(parseArgv('VLLM::Worker_TP6\u000060\u0000')).toEqual(['VLLM::Worker_TP6', '60']);
    expect(parseCmdline('')).toBeNull();
    expect(parseBootTime('cpu 1 2 3\nbtime 1764400000\nprocesses 5\n')).toBe(1764400000);
    expect(parseBootTime('cpu 1\n')).toBeNull();
  });

  it('cgroup lines with colons in the path round-trip (property)', () => {
    fc.assert(
      fc.property(fc.nat(20), fc.array(fc.constantFrom('cpu', 'memory', 'name=systemd'), { maxLength: 2 }), fc.string({ unit: fc.constantFrom('a', '/', ':', '.', '-', '@') }), (id, controllers, rest) => {
        const p = `/${rest}`;
        expect(parseCgroup(`${id}:${controllers.join(',')}:${p}\n`)).toEqual([{ hierarchyId: id, controllers, path: p }]);
      }),
      SEED,
    );
  });
});
