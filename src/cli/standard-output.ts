/**
 * stdout and stderr for the command without touching `process.stdout` / `process.stderr` on the
 * common path: the first touch of either builds a Node stream, which loads Node's stream and net
 * modules (a few milliseconds of every short command's start). A pipe, socket or file (systemd's
 * journal stream, a parent process) is written with writeSync, synchronous as Node's own stdio
 * is for pipes and files on Linux, so process.exit() loses nothing; a descriptor someone made
 * non-blocking (O_NONBLOCK) that is full is waited on, as a blocking one would be, where a Node
 * stream would queue the rest and lose it at exit. A terminal gets the Node stream.
 */
import { fstatSync, writeSync } from 'node:fs';

/** An output as the command writes it and asks about it. */
export interface StandardOutput {
  write(text: string): unknown;
  /** True when a terminal is behind it. */
  readonly isTTY: boolean;
  /** The terminal's width, when it is one. */
  readonly columns: number | undefined;
}

/** What a full non-blocking descriptor waits on between tries (never notified: a 1 ms sleep). */
const pause = new Int32Array(new SharedArrayBuffer(4));

/** Opens fd 1 or 2; `stream` returns the Node stream for it (only called when needed). */
function standardOutput(fd: 1 | 2, stream: () => NodeJS.WriteStream): StandardOutput {
  // Only a character device can be a terminal; asking Node whether it is one builds the stream.
  let useStream: boolean;
  try {
    useStream = fstatSync(fd).isCharacterDevice();
  } catch {
    useStream = true; // not open: let Node decide what that means
  }
  return {
    get isTTY(): boolean {
      return useStream && stream().isTTY === true;
    },
    get columns(): number | undefined {
      return useStream && stream().isTTY === true ? stream().columns : undefined;
    },
    write(text: string): unknown {
      if (useStream) return stream().write(text);
      const bytes = Buffer.from(text);
      let written = 0;
      while (written < bytes.length) {
        try {
          written += writeSync(fd, bytes, written);
        } catch (error) {
          const code = (error as NodeJS.ErrnoException).code;
          // The reader went away (`gpugate status | head -1`): its choice, not a failure.
          if (code === 'EPIPE') return true;
          if (code !== 'EAGAIN') throw error;
          Atomics.wait(pause, 0, 0, 1);
        }
      }
      return true;
    },
  };
}

let stdout: StandardOutput | undefined;
let stderr: StandardOutput | undefined;

/** The command's stdout. A closed reader (EPIPE) is ignored there as on the fd path. */
export function standardOut(): StandardOutput {
  stdout ??= standardOutput(1, () => {
    if (process.stdout.listenerCount('error') === 0) {
      process.stdout.on('error', (error: NodeJS.ErrnoException) => {
        if (error.code !== 'EPIPE') throw error;
      });
    }
    return process.stdout;
  });
  return stdout;
}

/** The command's stderr. */
export function standardError(): StandardOutput {
  stderr ??= standardOutput(2, () => process.stderr);
  return stderr;
}
