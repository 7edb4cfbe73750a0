/**
 * The frozen-filesystem fixture (test/helpers/frozen-fs.ts) really holds a writer in the kernel:
 * a child's write on the frozen filesystem shows state D, a SIGKILL stays pending without ending
 * it, and thawing lets it finish. dispose() leaves nothing behind even when a test "failed" with a
 * writer still stuck. Everything is awaited as an event (a /proc state, an exit), never a sleep.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { frozenFsPerTest, frozenFsUnavailable, isMountPoint, loopDevicesOf, makeFrozenFs } from '../helpers/frozen-fs';
import { procState, signalPending, until } from '../helpers/processes';

const unavailable = frozenFsUnavailable();
const skipped = unavailable === null ? '' : ` (skipped: ${unavailable})`;
/** Generous: a loaded 2-core machine may take seconds to schedule a fresh shell. */
const STATE_BOUND_MS = 20_000;

/** `sh -c 'echo x >> FILE'`, with its exit awaited as an event. */
function appendingShell(file: string): { child: ChildProcess; exited: Promise<[number | null, NodeJS.Signals | null]> } {
  const child = spawn('sh', ['-c', 'echo x >> "$1"', 'sh', file], { stdio: 'ignore' });
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  return { child, exited };
}

/** The loop devices whose backing file is (or was, before its removal) `image`, as the kernel lists them. */
function loopDevicesNaming(image: string): string[] {
  return fs.readdirSync('/sys/block').filter((name) => {
    try {
      return fs.readFileSync(`/sys/block/${name}/loop/backing_file`, 'utf8').startsWith(image);
    } catch {
      return false;
    }
  });
}

describe.skipIf(unavailable !== null)(`a frozen ext4 filesystem${skipped}`, () => {
  const frozenFs = frozenFsPerTest();

  it('holds a writer in uninterruptible sleep: state D, SIGKILL pending but not acted on, and it ends once thawed', async () => {
    const mounted = frozenFs();
    const file = path.join(mounted.path, 'block');
    fs.writeFileSync(file, ''); // writable while thawed
    mounted.freeze();
    expect(mounted.frozen).toBe(true);
    const { child, exited } = appendingShell(file);
    const pid = child.pid!;
    await until(`writer ${pid} to sleep in the kernel (state D)`, () => procState(pid) === 'D', STATE_BOUND_MS);
    child.kill('SIGKILL');
    await until(`SIGKILL to be pending for ${pid}`, () => signalPending(pid, os.constants.signals.SIGKILL), STATE_BOUND_MS);
    // Delivered, yet the process is still there and still in D: only the thaw can end it.
    expect(procState(pid)).toBe('D');
    mounted.thaw();
    expect(mounted.frozen).toBe(false);
    const [code, signal] = await exited;
    expect({ code, signal }).toEqual({ code: null, signal: 'SIGKILL' });
    expect(procState(pid)).toBeNull();
  });

  it('a write after thawing completes normally', async () => {
    const mounted = frozenFs();
    const file = path.join(mounted.path, 'after-thaw');
    mounted.freeze();
    mounted.thaw();
    const { exited } = appendingShell(file);
    expect(await exited).toEqual([0, null]);
    expect(fs.readFileSync(file, 'utf8')).toBe('x\n');
  });
});

describe.skipIf(unavailable !== null)(`disposing a frozen filesystem${skipped}`, () => {
  it('with a writer still stuck in it: thaws (the writer ends), unmounts, detaches the loop device and removes the temp dir', async () => {
    const mounted = makeFrozenFs();
    const dir = path.dirname(mounted.path);
    let writer: ReturnType<typeof appendingShell> | null = null;
    try {
      expect(isMountPoint(mounted.path)).toBe(true);
      expect(loopDevicesOf(mounted.image)).toHaveLength(1);
      mounted.freeze();
      writer = appendingShell(path.join(mounted.path, 'stuck'));
      const pid = writer.child.pid!;
      await until(`writer ${pid} to sleep in the kernel (state D)`, () => procState(pid) === 'D', STATE_BOUND_MS);
      // What a failed test leaves behind; dispose() must still clean all of it up.
      mounted.dispose();
      expect(await writer.exited).toEqual([0, null]);
      expect(isMountPoint(mounted.path)).toBe(false);
      expect(fs.existsSync(dir)).toBe(false);
    } finally {
      mounted.dispose(); // does nothing after the first (which may not have run)
      if (writer !== null && writer.child.exitCode === null && writer.child.signalCode === null) writer.child.kill('SIGKILL');
    }
    // A lazily unmounted filesystem frees its loop device once the writer holding it lets go.
    await until('no loop device to be backed by the image', () => loopDevicesNaming(mounted.image).length === 0, STATE_BOUND_MS).catch(() => undefined);
    expect(loopDevicesNaming(mounted.image)).toEqual([]);
  });
});
