/**
 * Fuzzing the procfs parsers (src/host/procfs.ts) and the holder classification built on them: any
 * text in /proc/PID/stat, status, cgroup, cmdline, maps and mountinfo is parsed without an
 * unexpected exception (stat alone may throw, and only its own "malformed" Error); generated files
 * of each kind round-trip to exactly the fields they were built from; and classifyHolder over a
 * prepared /proc filled with fuzzed files always resolves with a catalogue class and claims nothing
 * it has no proof of: never "gone" while the process's directory exists, a leftover only when its
 * cgroup file places it in the service's cgroup, an orphan only when its parent is a reaper, zombie
 * or draining only for the state or flag that says so, and any class but "unverifiable" only from
 * a stat line that parses.
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

  it('status, cgroup, cmdline, maps, mountinfo and btime: mutated real files never make a parser throw', () => {
    printed.push(describeRuns('status/cgroup/cmdline/maps/mountinfo/btime robustness', PARSER_RUNS));
    fc.assert(
      fc.property(
        procText(REAL.status), procText(REAL.cgroup), procText(REAL.maps), procText(REAL.mountinfo), procText(REAL.procStat), fc.string({ maxLength: 80 }),
        (status, cgroup, maps, mountinfo, procStat, cmdline) => {
          parseNSpid(status);
          unitOfCgroup(systemdCgroupPath(parseCgroup(cgroup)));
          parseMaps(maps);
          parseMountinfo(mountinfo);
          parseBootTime(procStat);
          parseCmdline(cmdline);
        },
      ),
      fuzzParameters(PARSER_RUNS),
    );
  });

  it('stat: any comm (spaces, parentheses, digits) and field values round-trip; a line cut before field 22 is rejected', () => {
    const comm = fc.string({ maxLength: 16, unit: fc.constantFrom('a', 'Z', ' ', '(', ')', ':', '1', '-', '/', '\u00e9') });
    const fields = fc.record({
      state: fc.constantFrom('R', 'S', 'D', 'Z', 'X', 'T', 't', 'I'),
      ppid: fc.nat(4_194_304),
      pgrp: fc.nat(4_194_304),
      flags: fc.nat(0xffffffff),
      numThreads: fc.integer({ min: 1, max: 100_000 }),
      startTimeTicks: fc.nat(),
    });
    printed.push(describeRuns('stat round trip', PARSER_RUNS));
    fc.assert(
      fc.property(fc.nat(4_194_304), comm, fields, fc.nat(19), (pid, name, f, kept) => {
        const line = makeStat(pid, name, { 3: f.state, 4: f.ppid, 5: f.pgrp, 9: f.flags, 20: f.numThreads, 22: f.startTimeTicks });
        expect(parseStat(line)).toEqual({ pid, comm: name, ...f });
        // Only `kept` fields after the comm: fewer than the 20 (fields 3 to 22) the parser needs.
        const close = line.lastIndexOf(')');
        const cut = `${line.slice(0, close + 1)} ${line.slice(close + 2).split(' ').slice(0, kept).join(' ')}`;
        expect(() => parseStat(cut)).toThrow(/^malformed \/proc stat line /);
      }),
      fuzzParameters(PARSER_RUNS),
    );
  });

  it('status and NSpid: generated fields round-trip (the last of a repeated name wins; values trimmed)', () => {
    const name = fc.string({ minLength: 1, maxLength: 12, unit: fc.constantFrom('a', 'B', '_', '-', '(', ')', '1', ' ') }).filter((n) => !n.startsWith(' '));
    const value = fc.string({ maxLength: 20, unit: fc.constantFrom('a', ' ', '\t', '0', ':', 'k', 'B') });
    printed.push(describeRuns('status round trip', PARSER_RUNS));
    fc.assert(
      fc.property(fc.array(fc.tuple(name, value), { maxLength: 12 }), fc.array(fc.nat(4_194_304), { maxLength: 4 }), (pairs, ids) => {
        const lines = pairs.filter(([key]) => key !== 'NSpid').map(([key, text]) => `${key}:\t${text}`);
        if (ids.length > 0) lines.splice(Math.floor(lines.length / 2), 0, `NSpid:\t${ids.join('\t')}`);
        const text = `${lines.join('\n')}\n`;
        const expected = new Map<string, string>();
        for (const line of lines) expected.set(line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trim());
        expect(parseStatus(text)).toEqual(expected);
        expect(parseNSpid(text)).toEqual(ids);
      }),
      fuzzParameters(PARSER_RUNS),
    );
  });

  it('cgroup: generated lines round-trip (paths may hold ":"), and the unit is the last .service or .scope component', () => {
    const word = fc.string({ minLength: 1, maxLength: 8, unit: fc.constantFrom('a', 'z', '_', '=', '-', '1') });
    const component = fc.string({ minLength: 1, maxLength: 10, unit: fc.constantFrom('a', 'b', '.', '-', ':', '@', '\\', ' ') }).filter((c) => !c.endsWith('.service') && !c.endsWith('.scope'));
    const entry = fc.record({ hierarchyId: fc.nat(20), controllers: fc.array(word, { maxLength: 3 }), path: fc.array(component, { maxLength: 4 }).map((parts) => `/${parts.join('/')}`) });
    printed.push(describeRuns('cgroup round trip', PARSER_RUNS));
    fc.assert(
      fc.property(fc.array(entry, { maxLength: 5 }), fc.array(component, { maxLength: 3 }), word, fc.constantFrom('.service', '.scope'), fc.array(component, { maxLength: 3 }), (entries, above, unit, suffix, below) => {
        const text = entries.map((e) => `${e.hierarchyId}:${e.controllers.join(',')}:${e.path}`).join('\n');
        expect(parseCgroup(`${text}\n`)).toEqual(entries);
        const unitPath = `/${[...above, `${unit}${suffix}`, ...below].join('/')}`;
        expect(unitOfCgroup(unitPath)).toBe(`${unit}${suffix}`);
        expect(unitOfCgroup(`/${[...above, ...below].join('/')}`)).toBeNull();
        // The unified hierarchy names the unit unless it is the root; then systemd's v1 tree does.
        expect(systemdCgroupPath(parseCgroup(`0::${unitPath}\n1:name=systemd:/elsewhere.service\n`))).toBe(unitPath);
        expect(systemdCgroupPath(parseCgroup(`0::/\n1:name=systemd:${unitPath}\n`))).toBe(unitPath);
      }),
      fuzzParameters(PARSER_RUNS),
    );
  });

  it('cmdline and maps: generated files round-trip (trailing NULs and empty words dropped; each mapped path once)', () => {
    const arg = fc.string({ maxLength: 10, unit: fc.constantFrom('a', ' ', '-', '=', '/', '\u00e9', '\n') });
    const mapped = fc.string({ minLength: 1, maxLength: 20, unit: fc.constantFrom('a', '/', ' ', '.', '(', ')', '-') }).map((p) => `/${p.trim()}`);
    printed.push(describeRuns('cmdline/maps round trip', PARSER_RUNS));
    fc.assert(
      fc.property(fc.array(arg, { maxLength: 6 }), fc.array(fc.oneof(mapped, fc.constantFrom('', '[heap]', '[stack]', '[vdso]')), { maxLength: 10 }), (args, names) => {
        const words = [...args];
        while (words.length > 0 && words[words.length - 1] === '') words.pop();
        expect(parseCmdline(args.map((a) => `${a}\0`).join(''))).toBe(words.length === 0 ? null : words.join(' '));
        const lines = names.map((name, i) => `7f00${i.toString(16).padStart(8, '0')}-7f01${i.toString(16).padStart(8, '0')} r-xp 00000000 fd:01 ${name === '' || name.startsWith('[') ? 0 : 1000 + i}${name === '' ? '' : `    ${name}`}`);
        expect(parseMaps(`${lines.join('\n')}\n`)).toEqual([...new Set(names.filter((n) => n.startsWith('/')))]);
      }),
      fuzzParameters(PARSER_RUNS),
    );
  });

  it('btime: found among other /proc/stat lines, absent or malformed gives null', () => {
    const other = fc.constantFrom('cpu  1 2 3 4', 'intr 5 6', 'ctxt 99', 'btimex 5', 'processes 7', 'procs_running 1', ' btime 3');
    printed.push(describeRuns('btime', PARSER_RUNS / 2));
    fc.assert(
      fc.property(fc.array(other, { maxLength: 6 }), fc.array(other, { maxLength: 6 }), fc.option(fc.nat(4_000_000_000)), (before, after, btime) => {
        const text = [...before, ...(btime === null ? [] : [`btime ${btime}`]), ...after].join('\n');
        expect(parseBootTime(`${text}\n`)).toBe(btime);
      }),
      fuzzParameters(PARSER_RUNS / 2),
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
  it('always resolves with a catalogue class and claims nothing the fuzzed files do not prove', async () => {
    const root = new ProcRoot();
    root.add({ pid: process.pid, copyFrom: process.pid, cgroup: `0::${UNIT}\n`, status: `Name:\tnode\nNSpid:\t${process.pid}\n` });
    const ctx = await prepareInspectContext({ procRoot: root.root, unitCgroup: UNIT, selfPid: process.pid });
    // A clean stat of a live engine worker started long before this test, so that the cases that
    // need proof (a leftover) do occur and their checks run.
    const cleanStat = makeStat(FAKE_PID, 'python3', { 4: 1, 22: 100 });
    const statText = fc.oneof(
      fc.constant(cleanStat),
      procText(cleanStat),
      fc.tuple(fc.string({ maxLength: 20 }), fc.constantFrom('R', 'S', 'D', 'Z', 'X', 'T', '?', '1'), fc.oneof(fc.nat(), fc.constant(-1), fc.constant(1e300)), fc.nat(0xffffffff)).map(
        ([comm, state, ppid, flags]) => makeStat(FAKE_PID, comm, { 3: state, 4: ppid, 9: flags, 22: 100 }),
      ),
    );
    let leftovers = 0;
    printed.push(describeRuns('classifyHolder', CLASSIFY_RUNS));
    try {
      await fc.assert(
        fc.asyncProperty(statText, fc.oneof(cgroupText, fc.constant(`0::${UNIT}\n`)), procText(REAL.status), fc.string({ maxLength: 40 }), fc.constantFrom('/dev/nvidia0', '/dev/nvidia0', '/dev/null', 'socket:[1]'), async (stat, cgroup, status, cmdline, fd) => {
          rmSync(path.join(root.root, String(FAKE_PID)), { recursive: true, force: true });
          root.add({ pid: FAKE_PID, stat, cgroup, status, cmdline, comm: 'python3\n', fds: { '3': fd }, maps: '' });
          const holder = await classifyHolder({ pid: FAKE_PID, gpus: [0], usedBytes: 1, usedBytesPerGpu: [{ gpu: 0, usedBytes: 1 }] }, Date.now(), ctx);
          expect(CLASSES.has(holder.class), holder.class).toBe(true);
          expect(holder.reason, holder.class).not.toBe('');
          // The process's directory exists: it is never "gone" (that would let memory be waited for as coming back).
          expect(holder.class).not.toBe('gone');
          let parsed: ReturnType<typeof parseStat> | null = null;
          try {
            parsed = parseStat(stat);
          } catch {
            parsed = null;
          }
          if (holder.class !== 'unverifiable') expect(parsed, `${holder.class} from an unparsable stat ${JSON.stringify(stat)}`).not.toBeNull();
          if (holder.class === 'zombie' || holder.class === 'zombie_live_threads') expect(['Z', 'X']).toContain(parsed?.state);
          if (holder.class === 'draining') expect(parsed?.state === 'D' || ((parsed?.flags ?? 0) & 0x4) !== 0, `draining with ${JSON.stringify(stat)}`).toBe(true);
          // The only processes in this /proc are the fake one and this test: an orphan's parent must be PID 1 (or none).
          if (holder.class === 'orphan') expect(parsed!.ppid, `orphan with ${JSON.stringify(stat)}`).toBeLessThanOrEqual(1);
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
    // The leftover check above ran (with 150 runs a leftover is all but certain to occur).
    expect(leftovers).toBeGreaterThan(0);
  }, 120_000);
});
