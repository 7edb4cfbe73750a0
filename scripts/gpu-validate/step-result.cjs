'use strict';
/**
 * The record each gpu-validate step leaves behind: `{ step, status, summary, checks, data }`
 * written as JSON to the path the script names, plus the shared helpers the step programs use
 * to read their inputs and options. status is 'pass', 'fail' or 'skip'.
 */
const fs = require('node:fs');

const MIB = 1024 * 1024;

/** Collects named checks; the step passes when every check passed. */
class StepResult {
  constructor(step) {
    this.step = step;
    this.checks = [];
    this.data = {};
    this.skipReason = null;
  }

  /** Records one check and prints it; returns `ok` so callers can branch on it. */
  check(name, ok, detail) {
    this.checks.push({ name, ok: Boolean(ok), detail });
    process.stdout.write(`  ${ok ? 'ok  ' : 'FAIL'} ${name}: ${detail}\n`);
    return Boolean(ok);
  }

  /** Records something worth reporting that is not a pass/fail criterion. */
  note(text) {
    process.stdout.write(`  note ${text}\n`);
    (this.data.notes ??= []).push(text);
  }

  skip(reason) {
    this.skipReason = reason;
    process.stdout.write(`  skip ${reason}\n`);
  }

  status() {
    if (this.checks.some((c) => !c.ok)) return 'fail';
    if (this.skipReason !== null || this.checks.length === 0) return 'skip';
    return 'pass';
  }

  write(file, summary) {
    const status = this.status();
    const failed = this.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`);
    const record = {
      step: this.step,
      status,
      summary: status === 'fail' ? failed.join('; ') : status === 'skip' ? `skipped: ${this.skipReason ?? 'nothing checked'}` : summary,
      checks: this.checks,
      data: this.data,
    };
    fs.writeFileSync(file, JSON.stringify(record, null, 2) + '\n');
  }
}

/** Parses `--name value` pairs; every value is a string. Unknown or missing values are usage errors. */
function parseOptions(argv, known) {
  const options = {};
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i];
    const value = argv[i + 1];
    const name = flag.startsWith('--') ? flag.slice(2) : '';
    if (!known.includes(name)) usage(`unknown option ${JSON.stringify(flag)} (expected one of ${known.map((k) => `--${k}`).join(', ')})`);
    if (value === undefined) usage(`option ${flag} needs a value`);
    options[name] = value;
  }
  return options;
}

function usage(message) {
  process.stderr.write(`${require('node:path').basename(process.argv[1] ?? 'step')}: ${message}\n`);
  process.exit(64);
}

/** Reads and parses a JSON file; returns `{ value }` or `{ error }` naming the file and the problem. */
function readJson(file) {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    return { error: `cannot read ${file}: ${err.message}` };
  }
  const trimmed = text.trim();
  if (trimmed === '') return { error: `${file} is empty (expected one JSON object)` };
  try {
    return { value: JSON.parse(trimmed) };
  } catch (err) {
    return { error: `${file} is not JSON (${err.message}); it starts with ${JSON.stringify(trimmed.slice(0, 120))}` };
  }
}

/** Reads a file's text, or '' when it does not exist. */
function readText(file) {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/** Bytes as MiB with one decimal, e.g. '1024.0 MiB'. */
function mib(bytes) {
  return bytes === null || bytes === undefined ? 'n/a' : `${(bytes / MIB).toFixed(1)} MiB`;
}

module.exports = { StepResult, parseOptions, readJson, readText, mib, MIB };

// As a command, for steps the shell script decides itself (a skip, or a step that could not run):
//   node step-result.cjs write FILE STEP pass|fail|skip SUMMARY
if (require.main === module) {
  const [command, file, step, status, summary] = process.argv.slice(2);
  if (command !== 'write' || file === undefined || step === undefined || !['pass', 'fail', 'skip'].includes(status ?? '') || summary === undefined) {
    usage('usage: node step-result.cjs write FILE STEP pass|fail|skip SUMMARY');
  }
  const record = { step, status, summary: status === 'skip' && !summary.startsWith('skipped') ? `skipped: ${summary}` : summary, checks: [], data: {} };
  if (status === 'fail') record.checks.push({ name: step, ok: false, detail: summary });
  fs.writeFileSync(file, JSON.stringify(record, null, 2) + '\n');
}
