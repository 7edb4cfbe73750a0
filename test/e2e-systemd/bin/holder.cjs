#!/usr/bin/env node
/**
 * An unrelated GPU user for the end-to-end suite: claims BYTES on each GPU listed from the driver
 * stand-in (one claim per GPU, from one child process each, as one CUDA context per device) and
 * stays until stopped. Usage: holder.cjs CLAIMS_DIR TITLE BYTES GPU[,GPU...]
 */
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const { spawn } = require('node:child_process');

const [claims, title, bytes, gpus, only] = process.argv.slice(2);
process.title = title;
const list = only === undefined ? gpus.split(',').map(Number) : [Number(only)];
if (only === undefined && list.length > 1) {
  // The first GPU is held by this (the main) process, the others by children.
  for (const gpu of list.slice(1)) spawn(process.execPath, [__filename, claims, title, bytes, gpus, String(gpu)], { stdio: 'inherit' });
}
const stat = fs.readFileSync(`/proc/${process.pid}/stat`, 'utf8');
const startTicks = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
const claim = path.join(claims, `${process.pid}.json`);
fs.writeFileSync(`${claim}.tmp`, JSON.stringify({ pid: process.pid, startTicks, gpu: list[0], bytes: Number(bytes), name: title }));
fs.renameSync(`${claim}.tmp`, claim);
process.on('SIGTERM', () => process.exit(0));
setInterval(() => {}, 1 << 30);
