/**
 * What the command writes reaches its reader whatever stdout and stderr are: a pipe whose reader
 * went away (EPIPE: exit as decided, no crash), a non-blocking pipe too small for the output
 * (EAGAIN: nothing lost), a file. The built command as a subprocess on real pipes and files.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cliEnv, cliPath } from '../helpers/cli';
import { simDevice, writeScenario } from '../helpers/sim';
import { makeTestTempDir } from '../helpers/temp-root';

const work = makeTestTempDir('gpugate-stdio-');
afterAll(() => rmSync(work, { recursive: true, force: true }));

const eightGpus = (): string => writeScenario({ devices: [0, 1, 2, 3, 4, 5, 6, 7].map((index) => simDevice(index)) });

/**
 * Runs gpugate with stdout on a pipe whose write end is O_NONBLOCK and holds one page (4 KiB),
 * read only after a pause: its output (several KiB) cannot fit at once, and gpugate is done
 * (about to exit) before anything is read.
 */
const SMALL_NONBLOCKING_PIPE = `
import fcntl, os, subprocess, sys, time
r, w = os.pipe()
fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
fcntl.fcntl(w, 1031, 4096)  # F_SETPIPE_SZ
child = subprocess.Popen(sys.argv[1:], stdout=w, stderr=subprocess.PIPE)
os.close(w)
time.sleep(1.0)
chunks = []
while True:
    chunk = os.read(r, 65536)
    if not chunk:
        break
    chunks.append(chunk)
err = child.stderr.read()
code = child.wait()
sys.stdout.write(str(code) + "\\n" + str(len(b"".join(chunks))) + "\\n")
sys.stdout.buffer.write(b"".join(chunks))
sys.stderr.buffer.write(err)
`;

describe('standard output', () => {
  it('a reader that goes away early (EPIPE) leaves the decided exit code and no crash', () => {
    const env = cliEnv(eightGpus(), { GPUGATE: `${process.execPath} ${cliPath()}` });
    // `true` exits at once: by the time gpugate writes, nobody reads the pipe.
    const run = spawnSync('bash', ['-c', '$GPUGATE status --json 2>"$ERR" | true; echo "${PIPESTATUS[0]}"'], { encoding: 'utf8', env: { ...env, ERR: path.join(work, 'epipe.err') } });
    expect(run.stdout.trim()).toBe('0');
    expect(readFileSync(path.join(work, 'epipe.err'), 'utf8')).not.toMatch(/internal error|EPIPE|Error:/);
  });

  it('a non-blocking pipe too small for the output loses nothing (EAGAIN)', () => {
    const run = spawnSync('python3', ['-c', SMALL_NONBLOCKING_PIPE, process.execPath, cliPath(), 'status', '--json'], { encoding: 'utf8', env: cliEnv(eightGpus()) });
    const [code, length, ...rest] = run.stdout.split('\n');
    expect(run.stderr).not.toMatch(/internal error|EAGAIN/);
    expect(code).toBe('0');
    const json = rest.join('\n');
    expect(Number(length)).toBeGreaterThan(4096);
    expect(Buffer.byteLength(json)).toBe(Number(length));
    expect((JSON.parse(json) as { devices: unknown[] }).devices).toHaveLength(8);
  });

  it('stdout and stderr to files hold the JSON document and the log line', () => {
    const out = path.join(work, 'check.out');
    const err = path.join(work, 'check.err');
    const run = spawnSync('sh', ['-c', `"$NODE" "$CLI" check --json >"${out}" 2>"${err}"`], { env: { ...cliEnv(eightGpus()), NODE: process.execPath, CLI: cliPath() } });
    expect(run.status).toBe(0);
    expect(JSON.parse(readFileSync(out, 'utf8'))).toMatchObject({ command: 'check', result: 'ready' });
    expect(readFileSync(err, 'utf8')).toMatch(/^event=ready gpus=0,1,2,3,4,5,6,7 /);
  });
});
