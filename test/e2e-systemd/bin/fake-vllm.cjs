#!/usr/bin/env node
/**
 * A vLLM-shaped server for the end-to-end suite: real processes with vLLM's names and its start
 * check, on gpugate's simulator.
 *   api     (the unit's main process, `vllm serve`): starts the engine, reports healthy once
 *           every worker has loaded (READY=1 too when NOTIFY_SOCKET is set, for Type=notify),
 *           then crashes (exit 1) if the plan says so;
 *   engine  (VLLM::EngineCore): starts one worker per GPU, relays "loaded", exits with its parent;
 *   worker  (VLLM::Worker_TP<n>, fake-vllm-worker.py): a Python process named with setproctitle,
 *           as vLLM's are; applies vLLM's check free >= utilization x total on its GPU (a
 *           ValueError exit when short), claims its memory from the driver stand-in, loads for
 *           LOAD ms. The orphan worker ignores SIGTERM and its parent's death for ORPHAN ms.
 * Plan (JSON file in $E2E_VLLM_PLAN): { tag, gpus, utilization, bytesPerGpu, loadMs, crashes,
 * crashAfterReadyMs, crashDuringLoad, orphanTp, orphanIgnoreMs, notify, events, claims, state, gpugate }.
 */
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');
const readline = require('node:readline');

const plan = JSON.parse(fs.readFileSync(process.env.E2E_VLLM_PLAN, 'utf8'));
const role = process.argv[2];

function event(name, extra = {}) {
  fs.appendFileSync(plan.events, `${JSON.stringify({ t: Date.now(), tag: plan.tag, event: name, pid: process.pid, ...extra })}\n`);
}

function crashesSoFar() {
  try {
    return Number(fs.readFileSync(path.join(plan.state, `${plan.tag}.crashes`), 'utf8'));
  } catch {
    return 0;
  }
}

function countCrash() {
  const file = path.join(plan.state, `${plan.tag}.crashes`);
  fs.writeFileSync(`${file}.tmp`, String(crashesSoFar() + 1));
  fs.renameSync(`${file}.tmp`, file);
}

function startTicks(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
}

function child(args, title) {
  return spawn(process.execPath, [__filename, ...args], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], env: { ...process.env, E2E_TITLE: title } });
}

if (process.env.E2E_TITLE) process.title = process.env.E2E_TITLE;

if (role === 'api') {
  const attempt = crashesSoFar();
  event('start', { attempt });
  const engine = child(['engine'], 'VLLM::EngineCore');
  const crashPlanned = attempt < plan.crashes;
  engine.on('message', (message) => {
    if (message === 'loading' && crashPlanned && plan.crashDuringLoad) {
      setTimeout(() => {
        countCrash();
        event('crash', { during: 'load' });
        process.exit(1);
      }, plan.loadMs / 2);
    }
    if (message !== 'ready') return;
    event('healthy', { attempt });
    if (plan.notify) require(path.join(plan.gpugate, 'dist', 'host', 'notify.js')).sdNotify('READY=1\nSTATUS=serving');
    if (crashPlanned && !plan.crashDuringLoad) {
      setTimeout(() => {
        countCrash();
        event('crash', { during: 'serving' });
        process.exit(1);
      }, plan.crashAfterReadyMs);
    }
  });
  engine.on('exit', (code) => {
    event('engine-exit', { code });
    process.exit(1);
  });
  process.on('SIGTERM', () => process.exit(0));
} else if (role === 'engine') {
  let loaded = 0;
  let loading = 0;
  let checked = 0;
  const workers = [];
  // The workers are Python (fake-vllm-worker.py): the engine reads every GPU's memory for them
  // through gpugate's library as it starts them, and each applies vLLM's check to its own GPU's.
  const { openNvml } = require(path.join(plan.gpugate, 'dist', 'index.js'));
  const startWorkers = (snapshot) => {
    for (let tp = 0; tp < plan.gpus; tp += 1) {
      const memory = snapshot.devices.find((device) => device.index === tp).memory;
      const worker = spawn('/usr/bin/python3', [path.join(__dirname, 'fake-vllm-worker.py'), String(tp), JSON.stringify(memory)], { stdio: ['pipe', 'pipe', 'inherit'] });
      workers.push(worker);
      // A worker that exits closes its pipe: writing to it then must not end the engine.
      worker.stdin.on('error', () => {});
      readline.createInterface({ input: worker.stdout }).on('line', (message) => {
        // Every worker passes its memory check before any loads, as vLLM's workers do.
        if (message === 'checked' && (checked += 1) === plan.gpus) for (const w of workers) w.stdin.write('load\n');
        if (message === 'loading' && (loading += 1) === plan.gpus) process.send('loading');
        if (message === 'loaded' && (loaded += 1) === plan.gpus) process.send('ready');
      });
      worker.on('exit', (code) => {
        if (code !== 0) process.exit(1);
      });
    }
  };
  openNvml().then(async (session) => {
    const snapshot = await session.snapshot();
    await session.close();
    startWorkers(snapshot);
  }, (error) => {
    process.stderr.write(`engine: ${error.message}\n`);
    process.exit(1);
  });
  process.on('disconnect', () => process.exit(1));
  process.on('SIGTERM', () => process.exit(0));
}
