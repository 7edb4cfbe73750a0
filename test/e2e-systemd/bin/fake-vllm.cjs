#!/usr/bin/env node
/**
 * A vLLM-shaped server for the end-to-end suite: real processes with vLLM's names and its start
 * check, on gpugate's simulator.
 *   api     (the unit's main process, `vllm serve`): starts the engine, reports healthy once
 *           every worker has loaded (READY=1 too when NOTIFY_SOCKET is set, for Type=notify),
 *           then crashes (exit 1) if the plan says so;
 *   engine  (VLLM::EngineCore): starts one worker per GPU, relays "loaded", exits with its parent;
 *   worker  (VLLM::Worker_TP<n>): applies vLLM's check free >= utilization x total on its GPU
 *           (a ValueError exit when short), claims its memory from the driver stand-in, loads for
 *           LOAD ms. The orphan worker ignores SIGTERM and its parent's death for ORPHAN ms.
 * Plan (JSON file in $E2E_VLLM_PLAN): { tag, gpus, utilization, bytesPerGpu, loadMs, crashes,
 * crashAfterReadyMs, crashDuringLoad, orphanTp, orphanIgnoreMs, notify, events, claims, state, gpugate }.
 */
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');

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
  for (let tp = 0; tp < plan.gpus; tp += 1) {
    const worker = child(['worker', String(tp)], `VLLM::Worker_TP${tp}`);
    workers.push(worker);
    worker.on('message', (message) => {
      // Every worker passes its memory check before any loads, as vLLM's workers do.
      if (message === 'checked' && (checked += 1) === plan.gpus) for (const w of workers) w.send('load');
      if (message === 'loading' && (loading += 1) === plan.gpus) process.send('loading');
      if (message === 'loaded' && (loaded += 1) === plan.gpus) process.send('ready');
    });
    worker.on('exit', (code) => {
      if (code !== 0) process.exit(1);
    });
  }
  process.on('disconnect', () => process.exit(1));
  process.on('SIGTERM', () => process.exit(0));
} else if (role === 'worker') {
  const tp = Number(process.argv[3]);
  const orphan = tp === plan.orphanTp;
  let leaving = false;
  const leave = () => {
    if (leaving) return;
    leaving = true;
    // The orphan outlives its parent and ignores SIGTERM for a while, as in the incident.
    setTimeout(() => process.exit(0), orphan ? plan.orphanIgnoreMs : 0);
  };
  process.on('SIGTERM', leave);
  process.on('disconnect', leave);
  const { openNvml } = require(path.join(plan.gpugate, 'dist', 'index.js'));
  openNvml().then(async (session) => {
    const snapshot = await session.snapshot({ devices: [tp] });
    await session.close();
    const memory = snapshot.devices[0].memory;
    const wanted = Math.ceil(memory.totalBytes * plan.utilization);
    if (memory.freeBytes < wanted) {
      const gib = (bytes) => (bytes / 1024 ** 3).toFixed(2);
      process.stderr.write(`ValueError: Free memory on device cuda:${tp} (${gib(memory.freeBytes)}/${gib(memory.totalBytes)} GiB) on startup is less than desired GPU memory utilization (${plan.utilization}, ${gib(wanted)} GiB).\n`);
      event('valueerror', { tp, freeBytes: memory.freeBytes });
      process.exit(1);
    }
    process.on('message', (message) => {
      if (message !== 'load') return;
      const claim = path.join(plan.claims, `${process.pid}.json`);
      fs.writeFileSync(`${claim}.tmp`, JSON.stringify({ pid: process.pid, startTicks: startTicks(process.pid), gpu: tp, bytes: plan.bytesPerGpu, name: `VLLM::Worker_TP${tp}` }));
      fs.renameSync(`${claim}.tmp`, claim);
      process.send('loading');
      // After a crash the engine is gone: an orphan keeps its memory instead of failing to report.
      setTimeout(() => process.connected && process.send('loaded'), plan.loadMs);
    });
    process.send('checked');
  }, (error) => {
    process.stderr.write(`worker ${tp}: ${error.message}\n`);
    process.exit(1);
  });
  setInterval(() => {}, 1 << 30);
}
