/**
 * The error contract as a consumer's compiler sees it: test/types/error-narrowing.ts compiles
 * under `strict` with no diagnostic, and each of its `@ts-expect-error` lines is needed: without
 * them the compiler reports an error on exactly those lines (a code that does not exist, a field
 * of another class), so the narrowing is proven both ways.
 */
import * as path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const FILE = path.join(__dirname, '..', 'types', 'error-narrowing.ts');
const EXPECT_ERROR = /^\s*\/\/ @ts-expect-error\b.*$/;

/** The last program: the next one reuses its unchanged files (all but the consumer file), so the second compilation is cheap. */
let previous: ts.Program | undefined;

function compile(replacement: string | null): readonly ts.Diagnostic[] {
  const options: ts.CompilerOptions = {
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2023.d.ts'],
    module: ts.ModuleKind.Node16,
    moduleResolution: ts.ModuleResolutionKind.Node16,
    types: ['node'],
    skipLibCheck: true,
    noEmit: true,
  };
  const host = ts.createCompilerHost(options);
  if (replacement !== null) {
    const original = host.getSourceFile.bind(host);
    host.getSourceFile = (fileName, language, onError, fresh) =>
      path.resolve(fileName) === FILE ? ts.createSourceFile(fileName, replacement, language) : original(fileName, language, onError, fresh);
  }
  const program = ts.createProgram([FILE], options, host, previous);
  previous = program;
  // Only the consumer file is judged (src itself is checked by `npm run typecheck`): checking one file is far cheaper.
  const file = program.getSourceFile(FILE);
  return [...program.getOptionsDiagnostics(), ...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)];
}

function describeDiagnostics(diagnostics: readonly ts.Diagnostic[]): string[] {
  return diagnostics.map((d) => {
    const where = d.file && d.start !== undefined ? `${path.basename(d.file.fileName)}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}` : '?';
    return `${where} TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
  });
}

describe('error codes narrow for a consumer (type level)', () => {
  it('the consumer file compiles under strict with no diagnostic', () => {
    expect(describeDiagnostics(compile(null))).toEqual([]);
  }, 60_000);

  it('without its @ts-expect-error lines, the compiler rejects exactly the lines they guard', () => {
    const text = ts.sys.readFile(FILE) ?? '';
    const lines = text.split('\n');
    // Blank each expectation (keeping line numbers); the line after it is the one it guards.
    const guarded = lines.flatMap((line, i) => (EXPECT_ERROR.test(line) ? [i + 2] : []));
    expect(guarded.length).toBeGreaterThanOrEqual(6);
    const stripped = lines.map((line) => (EXPECT_ERROR.test(line) ? '' : line)).join('\n');
    const diagnostics = compile(stripped).filter((d) => d.file !== undefined && path.resolve(d.file.fileName) === FILE);
    const failingLines = [...new Set(diagnostics.map((d) => d.file!.getLineAndCharacterOfPosition(d.start ?? 0).line + 1))].sort((a, b) => a - b);
    expect(failingLines, describeDiagnostics(diagnostics).join('\n')).toEqual(guarded);
  }, 60_000);
});
