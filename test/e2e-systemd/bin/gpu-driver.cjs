#!/usr/bin/env node
/**
 * A stand-in for the NVIDIA driver's memory bookkeeping, run as a service inside the test's
 * systemd. Workloads "allocate" GPU memory by writing a claim file (CLAIMS/<pid>.json:
 * { pid, startTicks, gpu, bytes, name }); this process turns the claims into the simulator's
 * scenario file (replaced atomically, so every NVML reader sees a change within one poll):
 *   - a live claimant is listed on its GPU with its memory;
 *   - once it is dead (pid gone or reused, or a zombie), its memory stays used and it stays
 *     listed for HOLD ms (the driver tearing the context down), then the memory drains linearly
 *     over DRAIN ms with the pid no longer listed, then the claim is forgotten.
 * Usage: gpu-driver.cjs CONFIG.json   (config: { scenario, claims, holdMs, drainMs, devices })
 */
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const TICK_MS = 20;
/** pid -> { claim, diedAtMs | null } */
const known = new Map();
let lastText = '';
let writes = 0;

function startTicksOf(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z' || fields[0] === 'X') return null;
    return fields[19];
  } catch {
    return null;
  }
}

function readClaims() {
  let names = [];
  try {
    names = fs.readdirSync(config.claims);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.endsWith('.json')) continue;
    const pid = Number(name.slice(0, -5));
    if (known.has(pid)) continue;
    try {
      const claim = JSON.parse(fs.readFileSync(path.join(config.claims, name), 'utf8'));
      known.set(pid, { claim, diedAtMs: null });
    } catch {
      // Half-written (the writer renames into place, so this is a foreign file): skip it.
    }
  }
}

function tick() {
  readClaims();
  const now = Date.now();
  const devices = config.devices.map((device) => ({ ...device, memory: { ...device.memory, usedBytes: 0 }, processes: [] }));
  for (const [pid, entry] of known) {
    const { claim } = entry;
    if (entry.diedAtMs === null && startTicksOf(pid) !== String(claim.startTicks)) entry.diedAtMs = now;
    const device = devices[claim.gpu];
    if (entry.diedAtMs === null || now - entry.diedAtMs < config.holdMs) {
      device.memory.usedBytes += claim.bytes;
      device.processes.push({ pid, usedBytes: claim.bytes, name: claim.name });
      continue;
    }
    const drained = (now - entry.diedAtMs - config.holdMs) / Math.max(1, config.drainMs);
    if (drained >= 1) {
      known.delete(pid);
      fs.rmSync(path.join(config.claims, `${pid}.json`), { force: true });
      continue;
    }
    device.memory.usedBytes += Math.round(claim.bytes * (1 - drained));
  }
  for (const device of devices) {
    const room = device.memory.totalBytes - device.memory.reservedBytes;
    if (device.memory.usedBytes > room) device.memory.usedBytes = room;
  }
  const text = `${JSON.stringify({ comment: 'written by the e2e driver stand-in', devices }, null, 1)}\n`;
  if (text === lastText) return;
  lastText = text;
  writes += 1;
  const tmp = `${config.scenario}.tmp-${writes}`;
  fs.writeFileSync(tmp, text);
  fs.renameSync(tmp, config.scenario);
}

tick();
setInterval(tick, TICK_MS);
process.on('SIGTERM', () => process.exit(0));
