/**
 * Reading a systemd unit: unit names, time spans, Exec command lines, `systemctl show` records,
 * and the unit-file reader, which must load every layout (drop-in order and masking, templates,
 * dash prefixes, type-wide drop-ins, aliases, resets, TimeoutSec=, Type= defaults) exactly as
 * systemd's own loader does: each layout is loaded by both and compared.
 */
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseExecLine, splitExecWords } from '../../src/host/systemd-exec-line';
import { formatTimeSpanUsec, parseTimeSpanUsec } from '../../src/host/systemd-time-span';
import { parseSystemctlShow, readUnitProperties, unitSourceFrom, type UnitProperties } from '../../src/host/systemd-unit';
import { normaliseUnitName } from '../../src/host/systemd-unit-name';
import { haveSystemdAnalyze, systemdDump } from '../helpers/systemd-dump';
import { makeTestTempDir } from '../helpers/temp-root';

const analyze = haveSystemdAnalyze();
const inCi = process.env.CI === 'true';

/** A fresh root with etc/systemd/system holding `files` (path → text; a text starting with "-> " is a symlink to the rest). */
function unitRoot(files: Record<string, string>): { root: string; dir: string } {
  const root = makeTestTempDir('gpugate-unit-');
  const dir = join(root, 'etc', 'systemd', 'system');
  mkdirSync(dir, { recursive: true });
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    if (text.startsWith('-> ')) symlinkSync(text.slice(3), join(dir, path));
    else writeFileSync(join(dir, path), text);
  }
  return { root, dir };
}

describe('unit names', () => {
  it('adds .service, keeps a known type, accepts instances', () => {
    expect(normaliseUnitName('vllm')).toBe('vllm.service');
    expect(normaliseUnitName('vllm.service')).toBe('vllm.service');
    expect(normaliseUnitName('vllm@llama-70b.service')).toBe('vllm@llama-70b.service');
    expect(normaliseUnitName('gpu.slice')).toBe('gpu.slice');
    expect(normaliseUnitName('a.b')).toBe('a.b.service');
  });

  it.each(['', '-vllm', '--all', 'a/b', '../../x', 'a b', 'a;b', 'vllm@.service', '@x.service', 'a@b@c.service', 'x'.repeat(300)])('rejects %j with a usage error naming it', (name) => {
    expect(() => normaliseUnitName(name)).toThrow(expect.objectContaining({ name: 'UsageError', input: name }));
  });
});

describe('time spans', () => {
  it.each([
    ['10', 's', 10e6], ['100ms', 'us', 100_000], ['1min 30s', 'us', 90e6], ['5min20s', 's', 320e6], ['30min', 's', 1800e6],
    ['1.5h', 's', 5400e6], ['infinity', 'us', Infinity], ['0', 's', 0], ['2 weeks', 's', 1_209_600e6],
  ] as const)('%s (bare numbers in %s) is %d µs', (text, bare, usec) => {
    expect(parseTimeSpanUsec(text, bare)).toBe(usec);
  });

  it.each(['', 'ten', '5 parsecs', '1min x'])('rejects %j', (text) => {
    expect(parseTimeSpanUsec(text)).toBeNull();
  });

  it('formats in systemd words', () => {
    expect(formatTimeSpanUsec(1500e6)).toBe('25min');
    expect(formatTimeSpanUsec(90e6)).toBe('1min 30s');
    expect(formatTimeSpanUsec(100_000)).toBe('100ms');
    expect(formatTimeSpanUsec(Infinity)).toBe('infinity');
  });
});

describe('Exec command lines in unit files', () => {
  it('splits words with quotes and escapes, and reads the prefixes', () => {
    expect(splitExecWords(`/bin/echo "a b" 'c d' x\\ty "q\\"q"`)).toEqual(['/bin/echo', 'a b', 'c d', 'x\ty', 'q"q']);
    expect(parseExecLine('-/usr/bin/gpugate wait --timeout 240s')).toEqual([{ path: '/usr/bin/gpugate', argv: ['/usr/bin/gpugate', 'wait', '--timeout', '240s'], ignoreErrors: true }]);
    expect(parseExecLine('@/usr/bin/python3 my-name -m x')?.[0]?.argv).toEqual(['my-name', '-m', 'x']);
    expect(parseExecLine('/bin/a 1 ; /bin/b 2')?.map((c) => c.argv)).toEqual([['/bin/a', '1'], ['/bin/b', '2']]);
    expect(parseExecLine('/bin/echo "unclosed')).toBeNull();
  });
});

describe('systemctl show output', () => {
  // The shape systemd 252 prints for these properties (systemctl show --property=…).
  const shown = [
    'Id=vllm.service', 'LoadState=loaded', 'FragmentPath=/etc/systemd/system/vllm.service',
    'DropInPaths=/etc/systemd/system/vllm.service.d/a.conf /etc/systemd/system/vllm.service.d/gpugate.conf',
    'Type=notify', 'Restart=on-failure', 'RestartUSec=10s', 'StartLimitIntervalUSec=30min', 'StartLimitBurst=6', 'TimeoutStartUSec=5min',
    'NotifyAccess=exec', 'KillMode=control-group',
    'ExecStartPre={ path=/usr/bin/node ; argv[]=/usr/bin/node /opt/gpugate/dist/cli/main.js wait --timeout 240s --notify ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }',
    'ExecStartPre={ path=/bin/true ; argv[]=/bin/true ; ignore_errors=yes ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }',
    'ExecStart={ path=/usr/bin/vllm ; argv[]=/usr/bin/vllm serve m --gpu-memory-utilization 0.85 ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }',
  ].join('\n');

  it('reads every property, each Exec record as its own command', () => {
    const unit = parseSystemctlShow('vllm.service', shown);
    expect(unit).toMatchObject({
      name: 'vllm.service', source: 'systemctl', type: 'notify', restart: 'on-failure', restartUsec: 10e6, startLimitIntervalUsec: 1800e6,
      startLimitBurst: 6, timeoutStartUsec: 300e6, notifyAccess: 'exec', killMode: 'control-group',
      dropInPaths: ['/etc/systemd/system/vllm.service.d/a.conf', '/etc/systemd/system/vllm.service.d/gpugate.conf'],
    });
    expect(unit.execStartPre).toEqual([
      { path: '/usr/bin/node', argv: ['/usr/bin/node', '/opt/gpugate/dist/cli/main.js', 'wait', '--timeout', '240s', '--notify'], ignoreErrors: false },
      { path: '/bin/true', argv: ['/bin/true'], ignoreErrors: true },
    ]);
    expect(unit.execStart[0]?.argv).toContain('--gpu-memory-utilization');
  });

  it('reads TimeoutStartUSec=infinity as no timeout', () => {
    expect(parseSystemctlShow('x.service', shown.replace('TimeoutStartUSec=5min', 'TimeoutStartUSec=infinity')).timeoutStartUsec).toBe(Infinity);
  });

  it('refuses a unit systemd has not loaded, naming its load state', () => {
    expect(() => parseSystemctlShow('nope.service', 'Id=nope.service\nLoadState=not-found\nLoadError=org.freedesktop.systemd1.NoSuchUnit "Unit nope.service not found."'))
      .toThrow(expect.objectContaining({ name: 'ConfigError', message: expect.stringContaining('LoadState=not-found') }));
  });

  it('reports a systemctl that cannot be run as systemd unavailable', async () => {
    await expect(readUnitProperties('x.service', { kind: 'systemctl', systemctl: '/nonexistent/systemctl' }))
      .rejects.toMatchObject({ name: 'SystemdUnavailableError', message: expect.stringContaining('/nonexistent/systemctl is not installed') });
  });

  it('chooses unit files when --unit-path or GPUGATE_SYSTEMD_UNIT_PATH names a directory', () => {
    expect(unitSourceFrom('/a', { GPUGATE_SYSTEMD_UNIT_PATH: '/b' })).toEqual({ kind: 'unit-files', directory: '/a' });
    expect(unitSourceFrom(undefined, { GPUGATE_SYSTEMD_UNIT_PATH: '/b' })).toEqual({ kind: 'unit-files', directory: '/b' });
    expect(unitSourceFrom(undefined, {})).toEqual({ kind: 'systemctl' });
  });
});

/** Unit layouts, each loaded by gpugate's reader and by systemd's. */
const LAYOUTS: Array<{ name: string; unit: string; files: Record<string, string> }> = [
  {
    name: 'later drop-ins win, an empty ExecStartPre= resets the list, TimeoutSec= sets the start timeout',
    unit: 'llm.service',
    files: {
      'llm.service': '[Unit]\nDescription=x\n\n[Service]\nExecStartPre=/bin/echo first "a b"\nExecStart=/usr/bin/vllm serve m \\\n  --gpu-memory-utilization 0.8\nRestart=on-failure\nRestartSec=10\nTimeoutSec=50\n',
      'llm.service.d/10-reset.conf': '[Service]\nExecStartPre=\nExecStartPre=-/bin/echo second\nTimeoutStartSec=5min 30s\nRestartSec=20\n',
      'llm.service.d/20-more.conf': '[Service]\nExecStartPre=/bin/echo third ; /bin/echo fourth\nRestartSec=3s\nKillMode=mixed\n',
      'llm.service.d/notes.txt': '[Service]\nRestartSec=99\n',
    },
  },
  {
    name: 'an instance: template, dash-prefix, type-wide and instance drop-ins; same file name masks the template\'s',
    unit: 'gpu-llm@big-model.service',
    files: {
      'gpu-llm@.service': '[Service]\nType=notify\nExecStart=/usr/bin/vllm serve %i --name %p-%j "%n" 100%%\nRestart=always\n',
      'gpu-llm@.service.d/20-m.conf': '[Service]\nKillMode=process\n',
      'gpu-llm@big-model.service.d/20-m.conf': '-> /dev/null',
      'gpu-llm@.service.d/10-x.conf': '[Service]\nRestartSec=1\n',
      'gpu-llm@big-model.service.d/10-x.conf': '[Service]\nRestartSec=2\n',
      'gpu-.service.d/05-dash.conf': '[Service]\nNotifyAccess=all\n',
      'gpu-llm@big-.service.d/06-not-applied.conf': '[Service]\nKillMode=none\n',
      'service.d/01-all.conf': '[Service]\nTimeoutStartSec=0\n',
    },
  },
  {
    name: 'an alias takes its target\'s file and both names\' drop-ins; a /dev/null drop-in masks one',
    unit: 'alias.service',
    files: {
      'real.service': '[Service]\nType=oneshot\nExecStart=/bin/true\n',
      'alias.service': '-> real.service',
      'alias.service.d/a.conf': '[Service]\nRestartSec=7\n',
      'real.service.d/b.conf': '[Service]\nNotifyAccess=main\n',
      'real.service.d/c.conf': '[Service]\nKillMode=process\n',
      'alias.service.d/c.conf': '-> /dev/null',
    },
  },
];

/** The settings both readers report, in the same words. */
function comparable(unit: UnitProperties): Record<string, unknown> {
  return {
    fragmentPath: unit.fragmentPath,
    dropInPaths: unit.dropInPaths,
    type: unit.type,
    restart: unit.restart,
    restartSec: formatTimeSpanUsec(unit.restartUsec),
    timeoutStartSec: formatTimeSpanUsec(unit.timeoutStartUsec),
    notifyAccess: unit.notifyAccess,
    killMode: unit.killMode,
    execStartPre: unit.execStartPre.map((c) => c.argv),
    execStart: unit.execStart.map((c) => c.argv),
  };
}

describe.skipIf(!analyze && !inCi)('the unit-file reader agrees with systemd\'s own loader', () => {
  it('systemd-analyze is installed (required in CI)', () => {
    expect(analyze).toBe(true);
  });

  it.each(LAYOUTS)('$name', async ({ unit, files }) => {
    const { root, dir } = unitRoot(files);
    const ours = comparable(await readUnitProperties(unit, { kind: 'unit-files', directory: dir }));
    const dump = systemdDump(root, unit);
    const span = (key: string): string => formatTimeSpanUsec(parseTimeSpanUsec(dump.fields.get(key) ?? '?', 'us') ?? NaN);
    expect(ours).toEqual({
      fragmentPath: dump.fragmentPath,
      dropInPaths: dump.dropInPaths,
      type: dump.fields.get('Type'),
      restart: dump.fields.get('Restart'),
      restartSec: span('RestartSec'),
      timeoutStartSec: span('TimeoutStartSec'),
      notifyAccess: dump.fields.get('NotifyAccess'),
      killMode: dump.fields.get('KillMode'),
      execStartPre: dump.exec.get('ExecStartPre') ?? [],
      execStart: dump.exec.get('ExecStart') ?? [],
    });
  });

  it('would notice a disagreement (the comparison can fail)', async () => {
    const { root, dir } = unitRoot({ 'x.service': '[Service]\nExecStart=/bin/true\nRestartSec=4\n' });
    const ours = comparable(await readUnitProperties('x.service', { kind: 'unit-files', directory: dir }));
    expect(ours.restartSec).toBe('4s');
    expect(systemdDump(root, 'x.service').fields.get('RestartSec')).toBe('4s');
    expect(systemdDump(root, 'x.service').fields.get('RestartSec')).not.toBe(formatTimeSpanUsec(100_000));
  });
});

describe('the unit-file reader', () => {
  it('reads the start limits from [Unit], and the old names from [Service]', async () => {
    const { dir } = unitRoot({
      'a.service': '[Unit]\nStartLimitIntervalSec=30min\nStartLimitBurst=6\n[Service]\nExecStart=/bin/true\n',
      'b.service': '[Service]\nExecStart=/bin/true\nStartLimitInterval=2min\nStartLimitBurst=3\n',
      'c.service': '[Service]\nExecStart=/bin/true\n',
    });
    const read = (name: string): Promise<UnitProperties> => readUnitProperties(name, { kind: 'unit-files', directory: dir });
    expect(await read('a.service')).toMatchObject({ startLimitIntervalUsec: 1800e6, startLimitBurst: 6 });
    expect(await read('b.service')).toMatchObject({ startLimitIntervalUsec: 120e6, startLimitBurst: 3 });
    expect(await read('c.service')).toMatchObject({ startLimitIntervalUsec: 10e6, startLimitBurst: 5, restartUsec: 100_000, timeoutStartUsec: 90e6 });
  });

  it('notes lines systemd would ignore, keeping the earlier value', async () => {
    const { dir } = unitRoot({ 'a.service': '[Service]\nExecStart=/bin/true\nRestart=sometimes\nRestartSec=ten\n' });
    const unit = await readUnitProperties('a.service', { kind: 'unit-files', directory: dir });
    expect(unit).toMatchObject({ restart: 'no', restartUsec: 100_000 });
    expect(unit.notes).toEqual([expect.stringMatching(/a\.service:3: Restart=sometimes is not one of/), expect.stringMatching(/a\.service:4: RestartSec=ten is not a time span/)]);
  });

  it('refuses a missing unit, a masked unit and a missing directory with a config error naming them', async () => {
    const { dir } = unitRoot({ 'masked.service': '-> /dev/null' });
    await expect(readUnitProperties('nope.service', { kind: 'unit-files', directory: dir })).rejects.toMatchObject({ name: 'ConfigError', message: expect.stringContaining('no unit file nope.service') });
    await expect(readUnitProperties('masked.service', { kind: 'unit-files', directory: dir })).rejects.toMatchObject({ name: 'ConfigError', message: expect.stringContaining('is masked') });
    await expect(readUnitProperties('a.service', { kind: 'unit-files', directory: join(dir, 'missing') })).rejects.toMatchObject({ name: 'ConfigError', message: expect.stringContaining('does not exist') });
  });
});
