// sanitizer-report.cjs: reads AddressSanitizer / LeakSanitizer / UBSan log files (log_path=...) and
// sorts what they report into "ours" (gpugate's own code: the addon, the simulator libraries, the
// leak canary) and "foreign" (Node.js, V8, a shell that a test spawned...).
//
// A leak is ours when the first frame of its allocation stack that is neither an allocator nor the
// C/C++ runtime lies in our code: the code that asked for the memory is the code that lost it.
// ASan errors (overflows, use-after-free...) and UBSan runtime errors are always reported: only
// our code is instrumented, so they are ours by construction.

'use strict';

const { readdirSync, readFileSync } = require('node:fs');
const { join } = require('node:path');

const LEAK_RE =
  /(Direct|Indirect) leak of (\d+) byte\(s\) in (\d+) object\(s\) allocated from:\n((?:[ \t]*#\d+ [^\n]*\n?)+)/g;
/** A sanitizer's own error line (an ASan error, a sanitizer CHECK failure, a UBSan report). */
function isErrorLine(line) {
  if (/^\s*SUMMARY:/.test(line)) return false;
  if (/runtime error: /.test(line)) return true;
  return /(Address|UndefinedBehavior|Leak)Sanitizer: /.test(line) && !/detected memory leaks/.test(line);
}

/** Frames of the allocator and of the C/C++ runtime: skipped when looking for who allocated. */
const RUNTIME_FRAME_RE =
  /libasan|liblsan|libubsan|libsanitizer|libstdc\+\+|libgcc_s|\/libc\.so|\/libc-|ld-linux|libpthread|__interceptor_|\bmalloc\b|\bcalloc\b|\brealloc\b|operator new|\/usr\/include\/|\/usr\/lib\/gcc\//;

/** Frames that are Node.js / V8 / libuv (symbol names survive even in a stripped node binary). */
const NODE_FRAME_RE = /\bin (v8::|v8impl::|node::|napi_|Builtins_|uv_|uv__)|\/node\+0x|\(<unknown module>\)/;

/**
 * Whether a stack frame line lies in gpugate's own code.
 * @param {string} frame one "#N 0x... in fn file:line" line
 * @param {string} repoRoot absolute path of the repository (source paths of our objects start there)
 */
function isOurFrame(frame, repoRoot) {
  if (/\bgpugate[\w.-]*\.(node|so)\b|\/gpugate-nvml-helper\b/.test(frame)) return true;
  if (/leak-canary/.test(frame)) return true;
  const inRepo = frame.includes(`${repoRoot}/`);
  if (!inRepo) return false;
  // The node-addon-api headers are compiled into our addon; other dependencies are not ours.
  return !frame.includes(`${repoRoot}/node_modules/`) || frame.includes('node-addon-api');
}

/**
 * Who allocated the memory of one leak: 'ours', 'foreign', or 'unknown' (only runtime frames).
 * @param {string[]} frames
 * @param {string} repoRoot
 */
function classifyLeak(frames, repoRoot) {
  for (const frame of frames.slice(1)) {
    if (isOurFrame(frame, repoRoot)) return 'ours';
    if (NODE_FRAME_RE.test(frame)) return 'foreign';
    if (RUNTIME_FRAME_RE.test(frame)) continue;
    return 'foreign';
  }
  return 'unknown';
}

/**
 * Parses the text of one sanitizer log.
 * @param {string} text
 * @param {string} repoRoot
 * @returns {{ leaks: {kind: string, bytes: number, objects: number, frames: string[], owner: string, text: string}[], errors: string[] }}
 */
function parseSanitizerLog(text, repoRoot) {
  const leaks = [];
  for (const m of text.matchAll(LEAK_RE)) {
    const frames = (m[4] ?? '').split('\n').map((l) => l.trim()).filter(Boolean);
    leaks.push({
      kind: m[1] ?? '',
      bytes: Number(m[2]),
      objects: Number(m[3]),
      frames,
      owner: classifyLeak(frames, repoRoot),
      text: m[0],
    });
  }
  const errors = text.split('\n').filter(isErrorLine).map((l) => l.trim());
  return { leaks, errors };
}

/**
 * Reads every log file in a directory (as written with log_path=<dir>/<prefix>).
 * @param {string} dir
 * @param {string} repoRoot
 */
function readSanitizerLogs(dir, repoRoot) {
  const reports = [];
  let names = [];
  try {
    names = readdirSync(dir);
  } catch {
    return reports;
  }
  for (const name of names.sort()) {
    const text = readFileSync(join(dir, name), 'utf8');
    reports.push({ file: name, text, ...parseSanitizerLog(text, repoRoot) });
  }
  return reports;
}

module.exports = { isOurFrame, classifyLeak, parseSanitizerLog, readSanitizerLogs };
