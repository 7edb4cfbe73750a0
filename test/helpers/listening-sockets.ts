/**
 * What a process listens on, read from /proc: the inodes of its sockets (/proc/PID/fd) against the
 * TCP sockets in state LISTEN of its network namespace (/proc/PID/net/tcp and tcp6). How the tests
 * prove that Node's inspector (127.0.0.1:9229) never opened in the `gpugate` process.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** The inodes of the sockets process `pid` has open. */
export function socketInodes(pid: number): Set<string> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match) inodes.add(match[1]!);
    } catch {
      // closed meanwhile
    }
  }
  return inodes;
}

/** TCP sockets in state LISTEN in the process's network namespace: local port and inode. */
export function listeningTcp(pid: number): Array<{ port: number; inode: string }> {
  const found: Array<{ port: number; inode: string }> = [];
  for (const table of ['tcp', 'tcp6']) {
    let text = '';
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10 || fields[3] !== '0A') continue;
      found.push({ port: parseInt(fields[1]!.split(':')[1]!, 16), inode: fields[9]! });
    }
  }
  return found;
}

/** The TCP ports process `pid` itself listens on (sockets it holds open in state LISTEN). */
export function ownListeningPorts(pid: number): number[] {
  const own = socketInodes(pid);
  return listeningTcp(pid).filter((socket) => own.has(socket.inode)).map((socket) => socket.port);
}
