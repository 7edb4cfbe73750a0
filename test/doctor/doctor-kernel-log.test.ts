/**
 * The kernel-log side of doctor: the Xid parser on realistic lines in each format the log comes
 * in (/dev/kmsg records, dmesg, journalctl -k), the Xid table's coverage, and the non-blocking
 * reader on a real FIFO whose writer never writes (it must return, not wait) and on /dev/kmsg.
 */
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { busIdOfXidAddress, explainXid, parseXidLines, XID_TABLE } from '../../src/doctor/xid-table';
import { readKernelLog, readNonBlocking } from '../../src/host/kernel-log';
import { until } from '../helpers/processes';
import { testTempDir } from '../helpers/sim';

const work = fs.mkdtempSync(path.join(testTempDir(), 'kernel-log-'));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

describe('parseXidLines', () => {
  it('reads a /dev/kmsg record: the Xid, the PCI address, the detail and the time since boot; continuation lines are skipped', () => {
    const text = [
      "3,2317,1724983012345,-;NVRM: Xid (PCI:0000:b3:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
      ' SUBSYSTEM=pci',
      ' DEVICE=+pci:0000:b3:00.0',
      '4,2318,1724983012400,-;NVRM: GPU 0000:b3:00.0: GPU has fallen off the bus.',
    ].join('\n');
    expect(parseXidLines(text)).toEqual([{
      xid: 79,
      pciAddress: '0000:b3:00',
      detail: "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
      uptimeSeconds: 1724983.012345,
      line: "NVRM: Xid (PCI:0000:b3:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    }]);
  });

  it('reads dmesg and journalctl -k lines, with and without a time since boot', () => {
    const text = [
      '[ 8812.415032] NVRM: Xid (PCI:0000:4c:00): 48, pid=91342, name=VLLM::Worker_TP2, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.',
      'Dec 01 10:14:03 gpu-node-7 kernel: NVRM: Xid (PCI:0000:1b:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)',
      'Dec 01 10:14:05 gpu-node-7 kernel: nvidia-modeset: WARNING: GPU:0: Lost display notification',
    ].join('\r\n');
    const events = parseXidLines(text);
    expect(events.map((e) => [e.xid, e.pciAddress, e.uptimeSeconds])).toEqual([[48, '0000:4c:00', 8812.415032], [154, '0000:1b:00', null]]);
    expect(events[1]?.detail).toBe('GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)');
  });

  it('maps the driver\'s PCI address to NVML\'s canonical bus id', () => {
    expect(busIdOfXidAddress('0000:5d:00')).toBe('00000000:5D:00.0');
    expect(busIdOfXidAddress('0001:1b:00.1')).toBe('00000001:1B:00.1');
  });

  it('explains every common Xid, each once, and nothing it does not know', () => {
    const common = [13, 31, 43, 45, 48, 61, 62, 63, 64, 74, 79, 94, 95, 119, 154];
    expect(XID_TABLE.map((entry) => entry.xid)).toEqual(common);
    for (const xid of common) expect(explainXid(xid)?.advice.length).toBeGreaterThan(20);
    expect(explainXid(79)?.status).toBe('fail');
    expect(explainXid(13)?.status).toBe('warn');
    expect(explainXid(12345)).toBeNull();
  });
});

describe('reading the kernel log never blocks', () => {
  it('returns from a FIFO whose writer holds it open and never writes (EAGAIN ends the read)', async () => {
    const fifo = path.join(work, 'kmsg-fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    // Held open for reading so that the writer's open completes.
    const holder = fs.openSync(fifo, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
    const writer = spawn('bash', ['-c', `exec 3>'${fifo}'; exec sleep 60`], { stdio: 'ignore' });
    try {
      await until('the writer to hold the FIFO open', () => fs.existsSync(`/proc/${writer.pid as number}/fd/3`));
      // A blocking read would wait for the writer's 60 s; this one sees EAGAIN and returns.
      expect(readNonBlocking(fifo)).toBe('');
    } finally {
      writer.kill('SIGKILL');
      fs.closeSync(holder);
    }
  });

  it('reads /dev/kmsg to its end when it can, else says why', async () => {
    const log = await readKernelLog();
    if (log.kind === 'ok') expect(typeof log.text).toBe('string');
    else expect(log.reason.length).toBeGreaterThan(0);
    const missing = await readKernelLog(path.join(work, 'no-such-log'));
    expect(missing).toMatchObject({ kind: 'unreadable', source: path.join(work, 'no-such-log') });
    if (missing.kind === 'unreadable') expect(missing.reason).toContain('ENOENT');
  });
});
