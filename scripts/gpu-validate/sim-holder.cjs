'use strict';
/**
 * The simulate-mode stand-in for "a CUDA context and the driver behind it".
 *
 * It starts a real process (the holder), writes the simulated host's scenario so that the
 * holder's real pid holds a known amount of memory on one GPU, and prints `READY <pid> <bytes>`.
 * When the holder dies (gpu-validate.sh SIGKILLs it), it plays the driver's asynchronous
 * release: for the first half of --drain-ms the dead pid is still listed with its memory (what
 * gpugate calls `gone`), for the second half no process is listed but half the memory is still
 * used, then the host is idle again and this program exits. A holder still alive after --max-ms
 * is killed, so nothing outlives a run.
 *
 * usage: node sim-holder.cjs --scenario PATH --gpu N --hold-bytes N [--drain-ms 1500] [--max-ms 200000]
 */
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const { parseArgs } = require('node:util');
const { withHeldMemory, replaceScenario } = require('./sim-scenario.cjs');

function integerOption(values, name, fallback) {
  const text = values[name];
  if (text === undefined) {
    if (fallback === undefined) fail(`--${name} is required`);
    return fallback;
  }
  if (!/^\d+$/.test(text)) fail(`--${name} ${JSON.stringify(text)}: expected a non-negative integer`);
  return Number(text);
}

function fail(message) {
  process.stderr.write(`sim-holder: ${message}\n`);
  process.exit(64);
}

let parsed;
try {
  parsed = parseArgs({
    options: {
      scenario: { type: 'string' },
      gpu: { type: 'string' },
      'hold-bytes': { type: 'string' },
      'drain-ms': { type: 'string' },
      'max-ms': { type: 'string' },
    },
    strict: true,
  }).values;
} catch (err) {
  fail(err.message);
}
const scenarioPath = parsed.scenario ?? fail('--scenario is required');
const gpu = integerOption(parsed, 'gpu');
const holdBytes = integerOption(parsed, 'hold-bytes');
const drainMs = integerOption(parsed, 'drain-ms', 1500);
const maxMs = integerOption(parsed, 'max-ms', 200000);

const base = JSON.parse(fs.readFileSync(scenarioPath, 'utf8'));
// The holder also ends itself if this program dies without killing it (it gets reparented).
const holderSource = `process.title = 'gpu-validate-holder';
const parent = process.ppid;
setInterval(() => { if (process.ppid !== parent) process.exit(0); }, 500);`;
const holder = spawn(process.execPath, ['-e', holderSource], {
  stdio: 'ignore',
});
let restored = false;
const restore = () => {
  if (!restored) {
    restored = true;
    replaceScenario(scenarioPath, base);
  }
};

holder.once('spawn', () => {
  replaceScenario(scenarioPath, withHeldMemory(base, gpu, holdBytes, holder.pid, holdBytes));
  process.stdout.write(`READY ${holder.pid} ${holdBytes}\n`);
});
holder.once('error', (err) => {
  process.stderr.write(`sim-holder: could not start the holder process: ${err.message}\n`);
  process.exit(70);
});

const lifetime = setTimeout(() => holder.kill('SIGKILL'), maxMs);
holder.once('exit', () => {
  clearTimeout(lifetime);
  // The scenario still lists the dead pid with its memory: the driver has not torn it down yet.
  setTimeout(() => {
    replaceScenario(scenarioPath, withHeldMemory(base, gpu, Math.floor(holdBytes / 2)));
    setTimeout(() => {
      restore();
      process.exit(0);
    }, Math.ceil(drainMs / 2));
  }, Math.floor(drainMs / 2));
});

for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  process.on(signal, () => {
    holder.kill('SIGKILL');
    restore();
    process.exit(143);
  });
}
