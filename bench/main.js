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
fs.mkdirSync(outDir, { recursive: true });
for (const name of fs.readdirSync(benchDir)) {
  if (!name.endsWith('.ts')) continue;
  const source = fs.readFileSync(path.join(benchDir, name), 'utf8');
  const { outputText } = ts.transpileModule(source, {
    fileName: name,
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
  });
  // Write then rename: another run may be loading these files at the same moment.
  const target = path.join(outDir, name.replace(/\.ts$/, '.js'));
  const temporary = `${target}.${process.pid}.tmp`;
  fs.writeFileSync(temporary, outputText);
  fs.renameSync(temporary, target);
}
require(path.join(outDir, 'run.js'));
