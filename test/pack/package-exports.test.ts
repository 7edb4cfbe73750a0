/**
 * The public surface of the built package: `require` and `import` of dist/ give exactly the names
 * of test/helpers/public-api.ts (internals such as parsePasswd, ancestorsOf, StabilityTracker or
 * globToRegExp are not among them), each one is documented in README.md's API section and carries
 * JSDoc in the shipped declarations. (test/pack/pack.test.ts checks the same list in a consumer project
 * that installed the packed tarball.)
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { declaredExports } from '../helpers/declared-exports';
import { MAX_PUBLIC_RUNTIME_NAMES, PUBLIC_RUNTIME_NAMES } from '../helpers/public-api';
import { repoRoot } from '../helpers/sim';

const root = repoRoot();

/** README's "## The API" section, up to the next level-2 heading. */
function readmeApiSection(): string {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const start = readme.indexOf('\n## The API\n');
  expect(start, 'README.md has a "## The API" section').toBeGreaterThan(-1);
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end === -1 ? undefined : end);
}

/** The names a fresh Node process gets from the built entry, by `require` (CommonJS) or `import` (ESM). */
function builtNames(kind: 'require' | 'import'): string[] {
  const script = kind === 'require'
    ? `console.log(JSON.stringify(Object.keys(require(${JSON.stringify(join(root, 'dist', 'index.js'))}))))`
    : `import(${JSON.stringify(join(root, 'dist', 'index.mjs'))}).then((ns) => console.log(JSON.stringify(Object.keys(ns).filter((k) => !['default', 'module.exports', '__esModule'].includes(k)))))`;
  const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 60_000 });
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
  return (JSON.parse(run.stdout) as string[]).sort();
}

describe('the public surface', () => {
  const expected = [...PUBLIC_RUNTIME_NAMES].sort();

  it(`stays small: at most ${MAX_PUBLIC_RUNTIME_NAMES} runtime names`, () => {
    expect(expected.length).toBeLessThanOrEqual(MAX_PUBLIC_RUNTIME_NAMES);
    expect(new Set(expected).size).toBe(expected.length);
  });

  it('require() of the built CommonJS entry gives exactly the public names', () => {
    expect(builtNames('require')).toEqual(expected);
  });

  it('import of the built ES module entry gives exactly the public names', () => {
    expect(builtNames('import')).toEqual(expected);
  });

  it('keeps internals out of the entry', () => {
    const names = builtNames('require');
    for (const internal of ['parsePasswd', 'ancestorsOf', 'StabilityTracker', 'globToRegExp', 'classifyHolder', 'LeaseDirectory', 'sdNotify']) {
      expect(names).not.toContain(internal);
    }
  });

  it("documents every public name in README.md's API section", () => {
    const section = readmeApiSection();
    const undocumented = expected.filter((name) => !new RegExp(`\`${name}[\`(]`).test(section));
    expect(undocumented, 'public names README.md\'s API section does not mention in backquotes').toEqual([]);
  });

  it('gives every public runtime name JSDoc in the shipped declarations', () => {
    const docs = declaredExports();
    const missing = expected.filter((name) => !docs.has(name));
    expect(missing, 'names dist/index.d.ts does not export').toEqual([]);
    const bare = expected.filter((name) => (docs.get(name) ?? '') === '');
    expect(bare, 'public names without JSDoc in dist/*.d.ts').toEqual([]);
  });

  it('declares for import exactly what it declares for require (dist/index.d.mts re-exports dist/index.d.ts)', () => {
    expect(readFileSync(join(root, 'dist', 'index.d.mts'), 'utf8')).toMatch(/export \* from '\.\/index\.js';/);
  });
});
