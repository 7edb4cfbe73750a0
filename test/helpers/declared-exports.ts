/**
 * What the built package declares for its users: each name dist/index.d.ts exports (values and
 * types), with the JSDoc text of the declaration it stands for, read by TypeScript's own checker.
 */
import { join } from 'node:path';
import ts from 'typescript';
import { repoRoot } from './sim';

export function declaredExports(): Map<string, string> {
  const entry = join(repoRoot(), 'dist', 'index.d.ts');
  const program = ts.createProgram([entry], { strict: true, noEmit: true, types: [] });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(entry);
  if (source === undefined) throw new Error(`cannot read ${entry}`);
  const moduleSymbol = checker.getSymbolAtLocation(source);
  if (moduleSymbol === undefined) throw new Error(`${entry} is not a module`);
  const docs = new Map<string, string>();
  for (const exported of checker.getExportsOfModule(moduleSymbol)) {
    const target = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
    docs.set(exported.getName(), ts.displayPartsToString(target.getDocumentationComment(checker)).trim());
  }
  return docs;
}
