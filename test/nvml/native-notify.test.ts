import { spawn } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { sdNotify } from '../../src/host/notify';
import { tempDir } from '../helpers/session-helpers';

// A real unix datagram socket, bound by python3, prints what it receives.
const receiver = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
addr = sys.argv[1]
s.bind('\\0' + addr[1:] if addr.startswith('@') else addr)
print('bound', flush=True)
for _ in range(int(sys.argv[2])):
    print(s.recv(4096).decode(), flush=True)
`;

const children: ChildProcessWithoutNullStreams[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill();
});

function listen(address: string, count: number): { ready: Promise<void>; received: Promise<string[]> } {
  const child = spawn('python3', ['-c', receiver, address, String(count)]);
  children.push(child);
  let output = '';
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const received = new Promise<string[]>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.startsWith('bound\n')) markReady();
    });
    child.on('error', reject);
    child.on('exit', () => resolve(output.split('\n').slice(1, 1 + count)));
  });
  return { ready, received };
}

describe('sdNotify / sendNotify', () => {
  it('delivers each text as one datagram to a socket path', async () => {
    const socketPath = path.join(tempDir(), 'notify.sock');
    const { ready, received } = listen(socketPath, 2);
    await ready;
    expect(sdNotify('READY=1', socketPath)).toBe(true);
    expect(sdNotify('STATUS=waiting for GPU 3 (91.8GiB used)', socketPath)).toBe(true);
    expect(await received).toEqual(['READY=1', 'STATUS=waiting for GPU 3 (91.8GiB used)']);
  });

  it('supports the abstract namespace (leading @) and the NOTIFY_SOCKET default', async () => {
    const address = `@gpugate-test-${process.pid}-${Date.now()}`;
    const { ready, received } = listen(address, 1);
    await ready;
    const previous = process.env['NOTIFY_SOCKET'];
    process.env['NOTIFY_SOCKET'] = address;
    try {
      expect(sdNotify('READY=1')).toBe(true);
    } finally {
      if (previous === undefined) delete process.env['NOTIFY_SOCKET'];
      else process.env['NOTIFY_SOCKET'] = previous;
    }
    expect(await received).toEqual(['READY=1']);
  });

  it('returns false when no socket is set, and throws naming the socket when sending fails', () => {
    expect(sdNotify('READY=1', undefined)).toBe(false);
    expect(sdNotify('READY=1', '')).toBe(false);
    const missing = path.join(tempDir(), 'nobody-listens.sock');
    expect(() => sdNotify('READY=1', missing)).toThrow(new RegExp(`NOTIFY_SOCKET '${missing}' failed: No such file or directory`));
    expect(() => sdNotify('READY=1', 'relative.sock')).toThrow(/not a unix socket path/);
    expect(() => sdNotify('READY=1', `/${'x'.repeat(200)}`)).toThrow(/longer than a unix socket path/);
  });
});
