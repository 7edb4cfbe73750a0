/**
 * Fuzzing the procfs parsers (src/host/procfs.ts) and the holder classification built on them: any
 * text in /proc/PID/stat, status, cgroup, cmdline, maps and mountinfo is parsed without an
 * unexpected exception (stat alone may throw, and only its own "malformed" Error); well-formed
 * generated lines round-trip; and classifyHolder over a prepared /proc filled with fuzzed files
 * always resolves with a catalogue class, calling a process a leftover only when its cgroup file
 * really places it in the service's cgroup.
 */
import fc from 'fast-check';
import { readFileSync, rmSync } from 'node:fs';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  parseBootTime,
  parseCgroup,
  parseCmdline,
  parseMaps,
  parseMountinfo,
  parseNSpid,
  parseStat,
  parseStatus,
  systemdCgroupPath,
  unitOfCgroup,
} from '../../src/host/procfs';
import { classifyHolder, prepareInspectContext } from '../../src/gate/stale';
import { ProcRoot, makeStat } from '../helpers/proc-root';
import { describeRuns, fuzzParameters } from './helpers/fuzz-settings';

const PARSER_RUNS = 1000;
const CLASSIFY_RUNS = 150;
const printed: string[] = [];
afterAll(() => console.log(`fuzz (procfs): ${printed.join('; ')}`));

const REAL = {
  stat: readFileSync('/proc/self/stat', 'utf8'),
  status: readFileSync('/proc/self/status', 'utf8'),
  cgroup: readFileSync('/proc/self/cgroup', 'utf8'),
  mountinfo: readFileSync('/proc/self/mountinfo', 'utf8'),
  maps: readFileSync('/proc/self/maps', 'utf8').split('\n').slice(0, 40).join('\n'),
  procStat: readFileSync('/proc/stat', 'utf8'),
};

const PROC_CHARS = fc.constantFrom(' ', '\t', '\n', ':', '(', ')', '/', '-', '0', '9', 'a', 'Z', '\\', '\u0000', ',', '.', '\u00e9');

/** Arbitrary text, or a real procfs file with a few characters changed, inserted or cut. */
function procText(real: string): fc.Arbitrary<string> {
  const edit = fc.record({ at: fc.nat(Math.max(0, real.length - 1)), op: fc.constantFrom('insert', 'delete', 'replace', 'truncate'), char: PROC_CHARS });
  return fc.oneof(
    fc.string({ maxLength: 200 }),
    fc.string({ maxLength: 120, unit: PROC_CHARS }),
    fc.array(edit, { minLength: 1, maxLength: 4 }).map((edits) => {
      let text = real;
      for (const { at, op, char } of edits) {
        const i = Math.min(at, text.length);
        if (op === 'insert') text = text.slice(0, i) + char + text.slice(i);
        else if (op === 'delete') text = text.slice(0, i) + text.slice(i + 1);
        else if (op === 'replace') text = text.slice(0, i) + char + text.slice(i + 1);
        else text = text.slice(0, i);
      }
      return text;
    }),
  );
}

describe('procfs parsers on arbitrary and mutated files (property)', () => {
  it('stat: parses to sane fields or throws only its own "malformed /proc stat line" Error', () => {
    printed.push(describeRuns('stat', PARSER_RUNS));
    fc.assert(
      fc.property(procText(REAL.stat), (text) => {
        let parsed;
        try {
          parsed = parseStat(text);
        } catch (error) {
          expect(error).toBeInstanceOf(Error);
          expect((error as Error).message.startsWith('malformed /proc stat line ')).toBe(true);
          return;
        }
        expect(Number.isSafeInteger(parsed.pid) && parsed.pid >= 0).toBe(true);
        expect(parsed.state).toMatch(/^[A-Za-z]$/);
        for (const value of [parsed.ppid, parsed.flags, parsed.numThreads, parsed.startTimeTicks]) expect(Number.isFinite(value)).toBe(true);
      }),
      fuzzParameters(PARSER_RUNS),
    );
  });

  it('status, NSpid, cgroup, cmdline, maps, mountinfo and btime never throw and return well-typed values', () => {
    printed.push(describeRuns('status/cgroup/cmdline/maps/mountinfo/btime', PARSER_RUNS));
    fc.assert(
      fc.property(
        procText(REAL.status), procText(REAL.cgroup), procText(REAL.maps), procText(REAL.mountinfo), procText(REAL.procStat), fc.string({ maxLength: 80 }),
        (status, cgroup, maps, mountinfo, procStat, cmdline) => {
          for (const [key, value] of parseStatus(status)) {
            expect(typeof key).toBe('string');
            expect(typeof value).toBe('string');
          }
          for (const id of parseNSpid(status)) expect(Number.isSafeInteger(id)).toBe(true);
          const entries = parseCgroup(cgroup);
          for (const entry of entries) {
            expect(Number.isSafeInteger(entry.hierarchyId)).toBe(true);
            expect(typeof entry.path).toBe('string');
          }
          const unitPath = systemdCgroupPath(entries);
          const unit = unitOfCgroup(unitPath);
          if (unit !== null) expect(unit.endsWith('.service') || unit.endsWith('.scope')).toBe(true);
          for (const file of parseMaps(maps)) expect(file.startsWith('/')).toBe(true);
          for (const mount of parseMountinfo(mountinfo)) {
            expect(typeof mount.fsType).toBe('string');
            expect(Array.isArray(mount.superOptions)).toBe(true);
          }
          const boot = parseBootTime(procStat);
          if (boot !== null) expect(Number.isSafeInteger(boot)).toBe(true);
          const joined = parseCmdline(cmdline);
          if (joined !== null) expect(typeof joined).toBe('string');
        },
      ),
      fuzzParameters(PARSER_RUNS),
    );
  });

  it('mountinfo lines with any path (spaces, tabs, newlines, backslashes escaped as the kernel does) round-trip', () => {
    const escape = (text: string): string => text.replace(/[ \t\n\\]/g, (c) => `\\${c.charCodeAt(0).toString(8).padStart(3, '0')}`);
    const pathText = fc.string({ minLength: 1, maxLength: 30, unit: fc.constantFrom('a', 'b', '/', ' ', '\t', '\n', '\\', '-', '\u00e9') }).map((p) => `/${p}`);
    printed.push(describeRuns('mountinfo round trip', PARSER_RUNS / 2));
    fc.assert(
      fc.property(fc.nat(10_000), fc.nat(10_000), pathText, pathText, fc.constantFrom('proc', 'tmpfs', 'ext4', 'overlay'), fc.array(fc.constantFrom('shared:1', 'master:2', 'propagate_from:3'), { maxLength: 3 }),
        (id, parent, root, mountPoint, fsType, optional) => {
          const line = [id, parent, '0:22', escape(root), escape(mountPoint), 'rw,nosuid', ...optional, '-', fsType, escape('src dev'), 'rw,hidepid=2'].join(' ');
          const [entry] = parseMountinfo(`${line}\n`);
          expect(entry).toEqual({ mountId: id, parentId: parent, root, mountPoint, mountOptions: ['rw', 'nosuid'], fsType, source: 'src dev', superOptions: ['rw', 'hidepid=2'] });
        }),
      fuzzParameters(PARSER_RUNS / 2),
    );
  });
});

const UNIT = '/system.slice/vllm.service';
const FAKE_PID = 3_999_999;
const CLASSES = new Set(['active', 'draining', 'zombie', 'zombie_live_threads', 'gone', 'unverifiable', 'leftover', 'orphan', 'foreign']);

/** cgroup files that may or may not put the process in UNIT, with garbage mixed in. */
const cgroupText = fc.array(
  fc.oneof(
    fc.constantFrom(`0::${UNIT}`, `0::${UNIT}/worker`, `0::${UNIT}.evil`, `0::/system.slice/vllm.service2`, '0::/system.slice/other.service', `1:name=systemd:${UNIT}`, '0::/', `0::${UNIT}:x`),
    fc.string({ maxLength: 40, unit: PROC_CHARS }),
  ),
  { maxLength: 4 },
).map((lines) => lines.join('\n'));

/** The paths a kernel cgroup file would name for the unified or systemd v1 hierarchy. */
function claimsUnit(text: string): boolean {
  return text.split('\n').some((line) => {
    const match = /^(?:0:|\d+:name=systemd):(.*)$/.exec(line);
    return match !== null && (match[1] === UNIT || match[1]!.startsWith(`${UNIT}/`));
  });
}

describe('holder classification over a fuzzed /proc (property)', () => {
  it('always resolves with a catalogue class, and "leftover" only for a process whose cgroup file places it in the unit', async () => {
    const root = new ProcRoot();
    root.add({ pid: process.pid, copyFrom: process.pid, cgroup: `0::${UNIT}\n`, status: `Name:\tnode\nNSpid:\t${process.pid}\n` });
    const ctx = await prepareInspectContext({ procRoot: root.root, unitCgroup: UNIT, selfPid: process.pid });
    const statText = fc.oneof(
      procText(makeStat(FAKE_PID, 'python3', { 4: 1, 22: 100 })),
      fc.tuple(fc.string({ maxLength: 20 }), fc.constantFrom('R', 'S', 'D', 'Z', 'X', 'T', '?', '1'), fc.oneof(fc.nat(), fc.constant(-1), fc.constant(1e300)), fc.nat(0xffffffff)).map(
        ([comm, state, ppid, flags]) => makeStat(FAKE_PID, comm, { 3: state, 4: ppid, 9: flags, 22: 100 }),
      ),
    );
    let leftovers = 0;
    printed.push(describeRuns('classifyHolder', CLASSIFY_RUNS));
    try {
      await fc.assert(
        fc.asyncProperty(statText, cgroupText, procText(REAL.status), fc.string({ maxLength: 40 }), fc.constantFrom('/dev/nvidia0', '/dev/null', 'socket:[1]'), async (stat, cgroup, status, cmdline, fd) => {
          rmSync(path.join(root.root, String(FAKE_PID)), { recursive: true, force: true });
          root.add({ pid: FAKE_PID, stat, cgroup, status, cmdline, comm: 'python3\n', fds: { '3': fd }, maps: '' });
          const holder = await classifyHolder({ pid: FAKE_PID, gpus: [0], usedBytes: 1 }, Date.now(), ctx);
          expect(CLASSES.has(holder.class), holder.class).toBe(true);
          expect(typeof holder.reason).toBe('string');
          if (holder.class === 'leftover') {
            leftovers += 1;
            expect(claimsUnit(cgroup), `called a leftover with cgroup ${JSON.stringify(cgroup)}`).toBe(true);
          }
        }),
        fuzzParameters(CLASSIFY_RUNS),
      );
    } finally {
      root.remove();
    }
    printed.push(`classifyHolder leftovers ${leftovers}`);
  }, 120_000);
});
