/**
 * checkUnit on real unit files in a temporary unit directory (read by the unit-file reader):
 * every check passes, warns and fails where it should, with the arithmetic in its evidence; the
 * shipped contrib unit passes them all, the seed unit (Restart=on-failure, RestartSec=10, default
 * limits, no gate) fails.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DoctorCheck } from '../../src/doctor/doctor-check';
import { worstStatus } from '../../src/doctor/doctor-check';
import { checkUnit, checkUnitNamed } from '../../src/cli/unit-checks';
import { findUnitGate } from '../../src/cli/unit-commands';
import { readUnitProperties } from '../../src/host/systemd-unit';
import { repoRoot } from '../helpers/sim';
import { makeTestTempDir } from '../helpers/temp-root';

const GATE = '/usr/local/bin/gpugate wait --min-free 0.9 --margin 2GiB --stable 5s --timeout 240s --notify';

/** A unit whose [Service] holds `service` lines (and [Unit] `unit` lines), checked. */
async function checks(service: string[], unit: string[] = [], dropIns: Record<string, string> = {}): Promise<DoctorCheck[]> {
  const dir = makeTestTempDir('gpugate-unit-checks-');
  writeFileSync(join(dir, 'llm.service'), `[Unit]\n${unit.join('\n')}\n\n[Service]\n${service.join('\n')}\n`);
  for (const [file, text] of Object.entries(dropIns)) {
    mkdirSync(join(dir, 'llm.service.d'), { recursive: true });
    writeFileSync(join(dir, 'llm.service.d', file), text);
  }
  return checkUnit(await readUnitProperties('llm.service', { kind: 'unit-files', directory: dir }));
}

function find(list: DoctorCheck[], id: string): DoctorCheck {
  const check = list.find((c) => c.id === id);
  if (check === undefined) throw new Error(`no check ${id} in ${list.map((c) => c.id).join(', ')}`);
  return check;
}

/** A unit guarded the way contrib/systemd recommends, with `changes` applied (a key set to null is dropped). */
function good(changes: Record<string, string | null> = {}): { service: string[]; unit: string[] } {
  const service: Record<string, string> = {
    ExecStartPre: GATE, ExecStart: '/usr/bin/vllm serve m --gpu-memory-utilization 0.9', Restart: 'on-failure', RestartSec: '10',
    TimeoutStartSec: '300', NotifyAccess: 'exec', KillMode: 'control-group',
  };
  const unit: Record<string, string> = { StartLimitIntervalSec: '30min', StartLimitBurst: '6' };
  for (const [key, value] of Object.entries(changes)) {
    const into = key in unit || key.startsWith('StartLimit') ? unit : service;
    if (value === null) delete into[key];
    else into[key] = value;
  }
  const lines = (record: Record<string, string>): string[] => Object.entries(record).map(([k, v]) => `${k}=${v}`);
  return { service: lines(service), unit: lines(unit) };
}

async function check(id: string, changes: Record<string, string | null> = {}): Promise<DoctorCheck> {
  const { service, unit } = good(changes);
  return find(await checks(service, unit), id);
}

describe('the shipped units and the seed unit', () => {
  it('contrib/systemd/vllm@.service passes every check', async () => {
    const dir = makeTestTempDir('gpugate-unit-checks-');
    writeFileSync(join(dir, 'vllm@.service'), readFileSync(join(repoRoot(), 'contrib', 'systemd', 'vllm@.service')));
    const list = checkUnit(await readUnitProperties('vllm@llama.service', { kind: 'unit-files', directory: dir }));
    expect(list.filter((c) => c.status !== 'pass')).toEqual([]);
    expect(list.map((c) => c.id)).toEqual(['unit.gate', 'unit.restart-limits', 'unit.start-timeout', 'unit.notify-access', 'unit.kill-mode', 'unit.memory-fraction']);
    expect(list.every((c) => c.subject === 'unit vllm@llama.service')).toBe(true);
  });

  it('a seed unit plus the shipped drop-in passes every check', async () => {
    const list = await checks(['ExecStart=/usr/bin/vllm serve m', 'Restart=on-failure', 'RestartSec=10'], [],
      { 'gpugate-wait.conf': readFileSync(join(repoRoot(), 'contrib', 'systemd', 'gpugate-wait.conf'), 'utf8') });
    expect(list.filter((c) => c.status !== 'pass')).toEqual([]);
  });

  it('the seed unit fails: no gate, and a crash loop that can never trip the default start limit', async () => {
    const list = await checks(['ExecStart=/usr/bin/vllm serve m --gpu-memory-utilization 0.9', 'Restart=on-failure', 'RestartSec=10']);
    expect(worstStatus(list)).toBe('fail');
    expect(find(list, 'unit.gate')).toMatchObject({ status: 'fail', advice: expect.stringContaining('gpugate systemd --unit llm.service --write') });
    expect(find(list, 'unit.restart-limits')).toMatchObject({
      status: 'fail',
      summary: expect.stringContaining('6 starts can never fall inside StartLimitIntervalSec=10s'),
      evidence: { restart: 'on-failure', restartSec: '10s', startLimitIntervalSec: '10s', startLimitBurst: 5, fastestLoop: '5 × 10s = 50s' },
    });
  });
});

describe('unit.restart-limits', () => {
  it('passes when even starts that wait the whole gate timeout trip the limit', async () => {
    expect(await check('unit.restart-limits')).toMatchObject({ status: 'pass', evidence: { slowestLoop: '6 × (10s + 4min) = 25min' } });
  });

  it('warns when a loop of full gate waits escapes the interval', async () => {
    const result = await check('unit.restart-limits', { StartLimitIntervalSec: '10min' });
    expect(result).toMatchObject({ status: 'warn', evidence: { slowestLoop: '6 × (10s + 4min) = 25min', startLimitIntervalSec: '10min' } });
    expect(result.advice).toContain('StartLimitBurst × (RestartSec= + the gate\'s --timeout)');
  });

  it('fails when the start limit is switched off', async () => {
    expect(await check('unit.restart-limits', { StartLimitIntervalSec: '0' })).toMatchObject({ status: 'fail', summary: expect.stringContaining('the start limit is off') });
  });

  it('passes Restart=no: nothing restarts by itself', async () => {
    expect(await check('unit.restart-limits', { Restart: 'no', StartLimitIntervalSec: null, StartLimitBurst: null })).toMatchObject({ status: 'pass' });
  });
});

describe('unit.gate', () => {
  it('passes a gpugate wait in ExecStartPre=, also when run as node --disable-sigusr1 …/gpugate/dist/cli/main.js', async () => {
    expect(await check('unit.gate')).toMatchObject({ status: 'pass', evidence: { setting: 'ExecStartPre' } });
    expect(await check('unit.gate', { ExecStartPre: '/usr/bin/node --disable-sigusr1 /usr/lib/node_modules/gpugate/dist/cli/main.js wait --timeout 240s' })).toMatchObject({ status: 'pass' });
  });

  it('warns when the gate runs node without --disable-sigusr1 (a SIGUSR1 would open the inspector in a root process), directly or behind env', async () => {
    for (const line of ['/usr/bin/node /usr/lib/node_modules/gpugate/dist/cli/main.js wait --timeout 240s', '/usr/bin/env node --max-old-space-size=256 /opt/gpugate/dist/cli/main.js wait --timeout 240s']) {
      expect(await check('unit.gate', { ExecStartPre: line })).toMatchObject({
        status: 'warn', summary: expect.stringContaining('without --disable-sigusr1'), advice: expect.stringContaining('node --disable-sigusr1'),
      });
    }
    expect(await check('unit.gate', { ExecStartPre: '/usr/bin/env node --disable-sigusr1 /opt/gpugate/dist/cli/main.js wait --timeout 240s' })).toMatchObject({ status: 'pass' });
  });

  it('passes the wrapper form in ExecStart=', async () => {
    const result = await check('unit.gate', { ExecStartPre: null, ExecStart: `${GATE} -- /usr/bin/vllm serve m` });
    expect(result).toMatchObject({ status: 'pass', evidence: { setting: 'ExecStart' } });
  });

  it('fails a "-" prefix: the gate\'s failure would be ignored', async () => {
    expect(await check('unit.gate', { ExecStartPre: `-${GATE}` })).toMatchObject({ status: 'fail', evidence: { ignoreErrors: true } });
  });

  it('fails flags that gpugate wait rejects', async () => {
    const result = await check('unit.gate', { ExecStartPre: '/usr/local/bin/gpugate wait --timeout soon' });
    expect(result).toMatchObject({ status: 'fail', summary: expect.stringContaining('--timeout "soon"') });
  });

  it('fails when ExecStartPre= has something else only', async () => {
    expect(await check('unit.gate', { ExecStartPre: '/bin/sh -c "nvidia-smi"' })).toMatchObject({ status: 'fail', evidence: { execStartPre: ['/bin/sh -c nvidia-smi'] } });
  });
});

describe('unit.start-timeout', () => {
  it.each([
    ['300', 'pass'], ['infinity', 'pass'], ['245', 'warn'], ['240', 'fail'], ['2min', 'fail'],
  ] as const)('TimeoutStartSec=%s against --timeout 240s: %s', async (timeout, status) => {
    const result = await check('unit.start-timeout', { TimeoutStartSec: timeout });
    expect(result.status).toBe(status);
    expect(result.evidence).toMatchObject({ gateTimeout: '4min' });
  });

  it('fails systemd\'s default 90 s against the gate\'s default 120 s', async () => {
    const result = await check('unit.start-timeout', { TimeoutStartSec: null, ExecStartPre: '/usr/local/bin/gpugate wait' });
    expect(result).toMatchObject({ status: 'fail', evidence: { timeoutStartSec: '1min 30s', gateTimeout: '2min' } });
  });
});

describe('unit.notify-access', () => {
  it.each([
    ['exec', 'pass'], ['all', 'pass'], ['main', 'warn'], ['none', 'warn'],
  ] as const)('NotifyAccess=%s with --notify in ExecStartPre=: %s', async (access, status) => {
    expect((await check('unit.notify-access', { NotifyAccess: access })).status).toBe(status);
  });

  it('warns on the default (none) and passes when the gate sends nothing', async () => {
    expect((await check('unit.notify-access', { NotifyAccess: null })).status).toBe('warn');
    expect((await check('unit.notify-access', { NotifyAccess: null, ExecStartPre: GATE.replace(' --notify', '') })).status).toBe('pass');
  });

  it('warns when exec access meets a gate started as a child (npx)', async () => {
    const result = await check('unit.notify-access', { ExecStartPre: `/usr/bin/npx ${GATE.replace('/usr/local/bin/', '')}` });
    expect(result).toMatchObject({ status: 'warn', summary: expect.stringContaining('/usr/bin/npx starts gpugate as a child') });
    expect((await check('unit.notify-access', { NotifyAccess: 'all', ExecStartPre: `/usr/bin/npx ${GATE.replace('/usr/local/bin/', '')}` })).status).toBe('pass');
  });
});

describe('unit.kill-mode', () => {
  it.each([
    ['control-group', GATE, 'pass'], ['mixed', GATE, 'pass'], ['process', GATE, 'warn'], ['none', GATE, 'warn'], ['process', `${GATE} --kill-stale`, 'pass'],
  ] as const)('KillMode=%s with %s: %s', async (mode, gate, status) => {
    const result = await check('unit.kill-mode', { KillMode: mode, ExecStartPre: gate });
    expect(result.status).toBe(status);
    expect(result.evidence).toMatchObject({ killMode: mode });
  });
});

describe('unit.memory-fraction', () => {
  it.each([
    ['0.9', '0.9', 'pass'], ['0.95', '0.9', 'pass'], ['0.8', '0.9', 'fail'], ['0.95', '0.5', 'warn'],
  ] as const)('--min-free %s against --gpu-memory-utilization %s: %s', async (minFree, utilization, status) => {
    const result = await check('unit.memory-fraction', {
      ExecStartPre: GATE.replace('--min-free 0.9', `--min-free ${minFree}`),
      ExecStart: `/usr/bin/vllm serve m --gpu-memory-utilization=${utilization}`,
    });
    expect(result.status).toBe(status);
    expect(result.evidence).toEqual({ gpuMemoryUtilization: utilization, gateMinFree: Number(minFree) });
  });

  it('reads the gate in vLLM\'s terms (--for vllm --min-free) and still fails one below the service\'s fraction', async () => {
    const engine = GATE.replace('--min-free 0.9', '--for vllm --min-free 0.9');
    const same = await check('unit.memory-fraction', { ExecStartPre: engine, ExecStart: '/usr/bin/vllm serve m --gpu-memory-utilization 0.9' });
    expect(same).toMatchObject({ status: 'pass', evidence: { gpuMemoryUtilization: '0.9', gateMinFree: 0.9, gateEngine: 'vllm' }, summary: expect.stringContaining('as vLLM does') });
    const below = await check('unit.memory-fraction', { ExecStartPre: engine, ExecStart: '/usr/bin/vllm serve m --gpu-memory-utilization 0.95' });
    expect(below).toMatchObject({ status: 'fail', advice: expect.stringContaining('--for vllm --min-free 0.95') });
  });

  it('warns on a fraction it cannot read, a size, or no --min-free; passes without --gpu-memory-utilization', async () => {
    expect((await check('unit.memory-fraction', { ExecStart: '/usr/bin/vllm serve m --gpu-memory-utilization ${UTIL}' })).status).toBe('warn');
    expect((await check('unit.memory-fraction', { ExecStartPre: GATE.replace('--min-free 0.9', '--min-free 80GiB') })).status).toBe('warn');
    expect((await check('unit.memory-fraction', { ExecStartPre: '/usr/local/bin/gpugate wait --timeout 240s' })).status).toBe('warn');
    expect((await check('unit.memory-fraction', { ExecStart: '/usr/bin/vllm serve m' })).status).toBe('pass');
  });
});

describe('findUnitGate', () => {
  it('reads the gate\'s settings as gpugate wait parses them', async () => {
    const dir = makeTestTempDir('gpugate-unit-checks-');
    writeFileSync(join(dir, 'a.service'), `[Service]\nExecStartPre=/bin/true\nExecStartPre=${GATE} --kill-stale\nExecStart=/bin/true\n`);
    const gate = findUnitGate(await readUnitProperties('a.service', { kind: 'unit-files', directory: dir }));
    expect(gate).toMatchObject({ setting: 'ExecStartPre', direct: true, error: null, settings: { timeoutMs: 240_000, minFree: { fraction: 0.9 }, notify: true, killStale: true } });
  });
});

describe('lines systemd ignores', () => {
  it('warn, naming file and line', async () => {
    const { service, unit } = good({ KillMode: 'gentle' });
    const result = find(await checks(service, unit), 'unit.ignored-lines');
    expect(result.status).toBe('warn');
    expect(result.evidence.lines).toEqual([expect.stringMatching(/llm\.service:\d+: KillMode=gentle is not one of/)]);
  });
});

describe('checkUnitNamed (what doctor --unit calls)', () => {
  it('reads and checks a unit by name from a unit directory', async () => {
    const dir = makeTestTempDir('gpugate-unit-checks-');
    writeFileSync(join(dir, 'vllm@.service'), readFileSync(join(repoRoot(), 'contrib', 'systemd', 'vllm@.service')));
    const list = await checkUnitNamed('vllm@a', { kind: 'unit-files', directory: dir });
    expect(list).toHaveLength(6);
    expect(worstStatus(list)).toBe('pass');
  });

  it('turns a unit that cannot be read into one failed check, and a bad name into a usage error', async () => {
    const dir = makeTestTempDir('gpugate-unit-checks-');
    expect(await checkUnitNamed('nope', { kind: 'unit-files', directory: dir })).toEqual([expect.objectContaining({
      id: 'unit.readable', subject: 'unit nope.service', status: 'fail', summary: expect.stringContaining(`no unit file nope.service in ${dir}`),
    })]);
    const viaSystemctl = await checkUnitNamed('nope', { kind: 'systemctl', systemctl: join(dir, 'no-systemctl') });
    expect(viaSystemctl[0]).toMatchObject({ id: 'unit.readable', status: 'fail', advice: expect.stringContaining('--unit-path DIR') });
    await expect(checkUnitNamed('../../x', { kind: 'unit-files', directory: dir })).rejects.toMatchObject({ name: 'UsageError' });
  });
});

describe('unit.gate-passable (with the host\'s GPU sizes)', () => {
  const GIB = 1024 ** 3;
  async function passable(gate: string, gpus: Parameters<typeof checkUnit>[2]): Promise<DoctorCheck | undefined> {
    const { service, unit } = good({ ExecStartPre: gate });
    const dir = makeTestTempDir('gpugate-unit-checks-');
    writeFileSync(join(dir, 'llm.service'), `[Unit]\n${unit.join('\n')}\n\n[Service]\n${service.join('\n')}\n`);
    const read = await readUnitProperties('llm.service', { kind: 'unit-files', directory: dir });
    return checkUnit(read, findUnitGate(read), gpus).find((c) => c.id === 'unit.gate-passable');
  }

  it('passes a gate an idle GPU can offer, fails one it cannot, judging the smallest GPU', async () => {
    const gpus = [{ index: 0, totalBytes: 96 * GIB, reservedBytes: 0.5 * GIB }, { index: 1, totalBytes: 48 * GIB, reservedBytes: 0.5 * GIB }];
    expect(await passable(GATE, gpus)).toMatchObject({ status: 'pass' });
    // 48 GiB × 0.96 = 46.08 GiB + 2 GiB > 48 − 0.5 − 1 = 46.5 GiB offered on GPU 1.
    const failed = await passable(GATE.replace('0.9', '0.96'), gpus);
    expect(failed).toMatchObject({ status: 'fail', evidence: { gpu: 1, idleFree: '46.5GiB' }, summary: expect.stringContaining('every start of the unit fails, even on an idle GPU') });
    expect(failed?.advice).toMatch(/^lower the gate's --margin to 430MiB or less/);
  });

  it('assumes 1 GiB reserved where the driver reports none (the v1 query), and advises lowering --min-free when no margin fits', async () => {
    const v1 = [{ index: 0, totalBytes: 16 * GIB, reservedBytes: null }];
    const failed = await passable(GATE.replace('0.9', '0.9').replace('--margin 2GiB', '--margin 1GiB'), v1);
    // 16 GiB × 0.9 = 14.4 GiB + 1 GiB > 16 − 1 (reserved assumed) − 1 (idle) = 14 GiB.
    expect(failed).toMatchObject({ status: 'fail', evidence: { idleFree: '14GiB' }, advice: expect.stringContaining('lower --min-free') });
  });

  it('judges a --for vllm gate as vLLM checks it: total less reserved, plus the CUDA context of the GPU model', async () => {
    const MIB = 1024 ** 2;
    // RTX PRO 6000: idle it offers 97887 − 640 − 1024 = 96223 MiB; vLLM at 0.98 needs
    // ceil(0.98 × 97247 MiB) + 555 MiB context = 95857.06 MiB, leaving 365 whole MiB of margin.
    const rtxPro = [{ index: 0, totalBytes: 97887 * MIB, reservedBytes: 640 * MIB, name: 'NVIDIA RTX PRO 6000 Blackwell Server Edition' }];
    const gate = (margin: string, engine = '--for vllm '): string => GATE.replace('--min-free 0.9 --margin 2GiB', `${engine}--min-free 0.98 --margin ${margin}`);
    expect(await passable(gate('365MiB'), rtxPro)).toMatchObject({ status: 'pass', evidence: { gateEngine: 'vllm' }, summary: expect.stringContaining('--for vllm --min-free 0.98') });
    const failed = await passable(gate('366MiB'), rtxPro);
    expect(failed).toMatchObject({ status: 'fail', evidence: { gpu: 0, idleFree: '94GiB' } });
    expect(failed?.advice).toMatch(/^lower the gate's --margin to 365MiB or less/);
    // A plain 0.98 of NVML's total asks 72 MiB more (0.98 × 640 MiB reserved, less the 555 MiB context): 300MiB fails without --for vllm.
    expect(await passable(gate('300MiB', ''), rtxPro)).toMatchObject({ status: 'fail' });
    expect(await passable(gate('300MiB'), rtxPro)).toMatchObject({ status: 'pass' });
  });

  it('is left out without GPU sizes (NVML unreadable), and passes a gate with no --min-free', async () => {
    expect(await passable(GATE, null)).toBeUndefined();
    expect(await passable(GATE, [])).toBeUndefined();
    expect(await passable('/usr/local/bin/gpugate wait --timeout 240s', [{ index: 0, totalBytes: 16 * GIB, reservedBytes: 0 }])).toMatchObject({ status: 'pass' });
  });
});
