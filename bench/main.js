#!/usr/bin/env node
// Entry of `npm run bench`: transpiles the harness (bench/*.ts) with the project's TypeScript
// into .tmp/bench/ (gitignored; type checking is `npm run typecheck`'s job) and runs it with the
// same arguments. Kept in plain JavaScript so the benchmark needs no extra runner.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const ts = require('typescript');

const benchDir = __dirname;
const outDir = path.join(benchDir, '..', '.tmp', 'bench');
// The dependency-free package files the harness shares with `gpugate bench`; transpiled beside
// it (.tmp/src/), where its `../src/...` imports find them.
const SHARED_SOURCES = ['src/latency-figures.ts'];
fs.mkdirSync(outDir, { recursive: true });
fs.mkdirSync(path.join(outDir, '..', 'src'), { recursive: true });
const sources = [
  ...fs.readdirSync(benchDir).filter((name) => name.endsWith('.ts')).map((name) => ({ file: path.join(benchDir, name), target: path.join(outDir, name) })),
  ...SHARED_SOURCES.map((name) => ({ file: path.join(benchDir, '..', name), target: path.join(outDir, '..', name) })),
];
for (const { file, target: tsTarget } of sources) {
  const name = path.basename(file);
  const source = fs.readFileSync(file, 'utf8');
  const { outputText } = ts.transpileModule(source, {
    fileName: name,
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
  });
  // Write then rename: another run may be loading these files at the same moment.
  const target = tsTarget.replace(/\.ts$/, '.js');
  const temporary = `${target}.${process.pid}.tmp`;
  fs.writeFileSync(temporary, outputText);
  fs.renameSync(temporary, target);
}
require(path.join(outDir, 'run.js'));
