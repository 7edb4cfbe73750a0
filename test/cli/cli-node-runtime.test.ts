/**
 * The runtime the `gpugate` command needs: Node.js 22.14 or newer, started by the entry point's
 * shebang `#!/usr/bin/env -S node --disable-sigusr1`. Under Node 22 and 24 (from the npm
 * registry, scripts/node-runtime.cjs) the real command runs through its shebang, and a SIGUSR1
 * that arrives during Node's own start-up, before gpugate's listener exists, opens no inspector;
 * the same signal to the same command started without the flag does (the attack this prevents).
 * Under Node 20 the command refuses to run, naming the Node it needs.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { cliEnv, cliPath, runCli, startCli, type CliProcess } from '../helpers/cli';
import { ownListeningPorts } from '../helpers/listening-sockets';
import { logLines, logText } from '../helpers/log-lines';
import { nodeRuntimeOrReason, withRuntimeOnPath } from '../helpers/node-runtimes';
import { repoRoot, simDevice, writeScenario } from '../helpers/sim';
import { makeTestTempDir } from '../helpers/temp-root';

const GiB = 1024 ** 3;
const work = makeTestTempDir('gpugate-node-runtime-');
const running: CliProcess[] = [];

afterEach(() => {
  for (const cli of running.splice(0)) cli.child.kill('SIGKILL');
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

const required = (JSON.parse(readFileSync(join(repoRoot(), 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node;
const idle = writeScenario({ devices: [simDevice(0)] });
/** GPU 0 held by a process that never lets go (this test runner: alive for the whole test). */
const busy = writeScenario({
  devices: [simDevice(0, { memory: { totalBytes: 96 * GiB, reservedBytes: 0, usedBytes: 50 * GiB }, processes: [{ pid: process.pid, usedBytes: 50 * GiB, kinds: ['compute'] }] })],
});

/**
 * A preload (NODE_OPTIONS=--require) that holds Node's start-up before gpugate's first line runs:
 * it says so on stderr and blocks until a byte arrives on stdin. A SIGUSR1 sent meanwhile reaches
 * Node exactly where an early `systemctl kill -s USR1` would; where Node handles the signal, it
 * interrupts the blocking read (EINTR), which the preload reads again rather than dying of it.
 */
const preload = join(work, 'hold-start-up.cjs');
writeFileSync(preload, [
  "process.stderr.write('start-up held\\n');",
  'for (;;) {',
  "  try { require('node:fs').readSync(0, Buffer.alloc(1)); break; } catch (error) { if (error.code !== 'EINTR') throw error; }",
  '}',
].join('\n'));

/** What Node prints when the inspector starts (or tries to: the port may be taken). */
const INSPECTOR = /Debugger listening|Starting inspector/;

/**
 * Backstops only: every step below waits for an event (a line on stderr, the exit), and a loaded
 * machine may take many seconds to start Node under a preload.
 */
const EVENT_BACKSTOP_MS = 60_000;
const TEST_BACKSTOP_MS = 3 * EVENT_BACKSTOP_MS;

/** Starts `gpugate wait` on the busy GPU with start-up held, sends SIGUSR1, then lets start-up go on. */
async function signalDuringStartUp(launch: readonly string[], env: NodeJS.ProcessEnv): Promise<CliProcess> {
  const cli = startCli(['wait', '--stable', '0s', '--timeout', '60s', '--interval', '100ms'], {
    launch,
    env: { ...env, NODE_OPTIONS: `--require ${preload}` },
    stdinPipe: true,
    killAfterMs: TEST_BACKSTOP_MS,
  });
  running.push(cli);
  await cli.waitFor(/start-up held/, 'stderr', EVENT_BACKSTOP_MS);
  cli.child.kill('SIGUSR1');
  cli.child.stdin!.end('go');
  return cli;
}

for (const major of [22, 24]) {
  const { runtime, reason } = nodeRuntimeOrReason(major);
  describe.skipIf(runtime === null)(`under Node ${major}${reason === null ? '' : ` (skipped: ${reason})`}`, () => {
    it('runs through its shebang as node --disable-sigusr1, and the wrapper runs CMD', async () => {
      const run = await runCli(['wait', '--stable', '0s', '--', 'sh', '-c', 'readlink /proc/$PPID/exe; tr "\\0" " " < /proc/$PPID/cmdline'], {
        launch: [cliPath()],
        env: withRuntimeOnPath(cliEnv(idle), runtime!),
      });
      expect(run.code, run.stderr).toBe(0);
      const [exe, commandLine] = run.stdout.split('\n');
      expect(exe).toBe(runtime!.node);
      expect(commandLine).toBe(`node --disable-sigusr1 ${cliPath()} wait --stable 0s -- sh -c ${'readlink /proc/$PPID/exe; tr "\\0" " " < /proc/$PPID/cmdline'} `);
    });

    it('a SIGUSR1 during Node\'s own start-up opens no inspector: the wait goes on and ends on SIGTERM', async () => {
      const cli = await signalDuringStartUp([cliPath()], withRuntimeOnPath(cliEnv(busy), runtime!));
      // gpugate's own code runs and polls: start-up, with any inspector it would have opened, is over.
      await cli.waitFor(/waiting gpu=0 /, 'stderr', EVENT_BACKSTOP_MS);
      const pid = cli.child.pid!;
      expect(ownListeningPorts(pid)).toEqual([]);
      expect(cli.stderr()).not.toMatch(INSPECTOR);
      cli.child.kill('SIGTERM');
      const run = await cli.done;
      expect(run.code).toBe(143);
      expect(run.stderr).not.toMatch(INSPECTOR);
    }, TEST_BACKSTOP_MS);

    it('the attack: the same SIGUSR1 to the command started without --disable-sigusr1 opens the inspector', async () => {
      const cli = await signalDuringStartUp([runtime!.node, cliPath()], cliEnv(busy));
      await cli.waitFor(INSPECTOR, 'stderr', EVENT_BACKSTOP_MS);
      cli.child.kill('SIGKILL');
      await cli.done;
    }, TEST_BACKSTOP_MS);
  });
}

describe('the Node requirement, stated once as data', () => {
  it('package.json engines is the version the docs state (README.md, docs/install.md)', () => {
    expect(required).toBe('>=22.14');
    for (const doc of ['README.md', 'docs/install.md']) {
      const text = readFileSync(join(repoRoot(), doc), 'utf8');
      expect(text, doc).toContain('Node.js 22.14 or newer');
      expect(text, doc).not.toMatch(/Node\.js 20 or newer|Node\.js 20\+/);
    }
  });
});

const node20 = nodeRuntimeOrReason(20);
describe.skipIf(node20.runtime === null)(`under Node 20, which lacks --disable-sigusr1${node20.reason === null ? '' : ` (skipped: ${node20.reason})`}`, () => {
  it(`started as node main.js: refuses with exit 78, naming the Node it needs (${required})`, async () => {
    const run = await runCli(['wait', '--', 'sh', '-c', 'echo must-not-run'], { launch: [node20.runtime!.node, cliPath()], env: cliEnv(idle) });
    expect(run.code).toBe(78);
    expect(run.stdout).toBe('');
    const escapedNode = node20.runtime!.node.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    // One logfmt line like every other, read here as a person reads it.
    expect(logLines(run.stderr)).toHaveLength(1);
    expect(logText(run.stderr)).toMatch(new RegExp(`^gpugate: Node\\.js 22\\.14 or newer is required \\(package\\.json engines "${required}": --disable-sigusr1\\); this is Node\\.js 20\\.\\d+\\.\\d+ \\(${escapedNode}\\): install a current Node\\.js LTS, see docs/install\\.md\n$`));
  });

  it('started through its shebang: node itself rejects the flag before any JavaScript runs (exit 9)', async () => {
    const run = await runCli(['wait', '--', 'sh', '-c', 'echo must-not-run'], { launch: [cliPath()], env: withRuntimeOnPath(cliEnv(idle), node20.runtime!) });
    expect(run.code).toBe(9);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('bad option: --disable-sigusr1');
  });
});
