// Runs as PID 1 of a fresh PID namespace (`unshare --pid --fork --mount-proc node pid-reuse.cjs
// DIST MODE`), so pids can be chosen through /proc/sys/kernel/ns_last_pid. A keeper process
// starts the leftover L (which exits on SIGTERM) and waits for it; the moment L is reaped, the
// keeper makes L's pid the next one and starts an unrelated newcomer N, which so gets L's pid.
// reapStale (from DIST, MODE 'pidfd' or 'verify') signals L with a grace long enough for all of
// that to happen inside it. Prints one JSON line: the actions (and each as it was recorded), both pids, whether N survived and
// which signals N saw.
'use strict';
const { spawn } = require('node:child_process');
const { readFileSync } = require('node:fs');
const path = require('node:path');

const [dist, mode] = process.argv.slice(2);
const { reapStale } = require(path.join(dist, 'gate', 'reap.js'));
const { readBootTimeMs, readProcess, startTimeMsOf } = require(path.join(dist, 'host', 'procfs.js'));

const KEEPER = `
import os, sys, time
leftover = os.fork()
if leftover == 0:
    os.execvp('bash', ['bash', '-c', 'trap "exit 0" TERM; while :; do sleep 0.01; done'])
print(leftover, flush=True)
os.waitpid(leftover, 0)
with open('/proc/sys/kernel/ns_last_pid', 'w') as f:
    f.write(str(leftover - 1))
newcomer = os.fork()
if newcomer == 0:
    os.execvp('bash', ['bash', '-c', 'trap "echo TERM" TERM; echo ready; while :; do sleep 0.01; done'])
print('newcomer %d' % newcomer, flush=True)
os.waitpid(newcomer, 0)
`;

function lines(stream) {
  const queue = [];
  const waiters = [];
  let buffer = '';
  stream.setEncoding('utf8').on('data', (chunk) => {
    buffer += chunk;
    let newline;
    while ((newline = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + 1);
      const waiter = waiters.shift();
      if (waiter) waiter(line);
      else queue.push(line);
    }
  });
  return () => (queue.length > 0 ? Promise.resolve(queue.shift()) : new Promise((resolve) => waiters.push(resolve)));
}

function alive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2)[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

async function main() {
  // The newcomer's bash inherits this pipe: its "ready" and any "TERM" come back here too.
  const keeper = spawn('python3', ['-c', KEEPER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const next = lines(keeper.stdout);
  const leftover = Number(await next());
  await new Promise((resolve) => setTimeout(resolve, 200));
  const info = await readProcess(leftover);
  const bootTimeMs = await readBootTimeMs();
  if (info.kind !== 'ok' || bootTimeMs === null) throw new Error(`cannot read the leftover ${leftover}`);
  const holder = {
    pid: leftover, class: 'leftover', gpus: [0], usedBytes: 1, comm: info.comm, cmdline: info.cmdline, state: info.stat.state,
    ppid: info.stat.ppid, cgroup: info.cgroup, unit: null, startTime: startTimeMsOf(info.stat, bootTimeMs), reason: 'test',
  };
  const report = { holders: [holder], perGpu: [], shm: { leaked: [], tmpfsFreeBytes: null, tmpfsTotalBytes: null }, unitCgroup: null, nestedPidNamespace: false, unitProcesses: [] };
  let newcomer = null;
  const newcomerSaw = [];
  // The keeper's "newcomer PID" and the newcomer's own "ready" may come in either order.
  let ready;
  const newcomerReady = new Promise((resolve) => (ready = resolve));
  let sawReady = false;
  void (async () => {
    for (;;) {
      const line = await next();
      const match = /^newcomer (\d+)$/.exec(line);
      if (match) newcomer = Number(match[1]);
      else if (line === 'ready') sawReady = true;
      else newcomerSaw.push(line);
      if (newcomer !== null && sawReady) ready();
    }
  })();
  const events = [];
  const actions = await reapStale(report, { graceMs: 1500, pidfd: mode === 'pidfd', onAction: (action) => events.push({ ...action, sent: [...action.sent] }) });
  // However slow the machine, the newcomer runs before the verdict; then give a late signal time to land.
  await Promise.race([newcomerReady, new Promise((resolve) => setTimeout(resolve, 15_000))]);
  await new Promise((resolve) => setTimeout(resolve, 300));
  const result = { actions, events, leftover, newcomer, newcomerAlive: newcomer !== null && alive(newcomer), newcomerSaw };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(0);
}

main().catch((error) => {
  process.stderr.write(`${error.stack}\n`);
  process.exit(1);
});
