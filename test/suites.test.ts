/**
 * The suites of test/suites.cjs cover every test file exactly once, and each runs in CI: every
 * file on disk belongs to one suite, every glob names a file, each slow suite has its npm script
 * (`test:<name>`), and .ci/run runs `npm test`, every slow suite and the end-to-end suite.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, matchesGlob } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ALL_TEST_FILES, DEFAULT_SUITE, DEFAULT_SUITE_EXCLUDES, E2E_SUITE, SLOW_SUITES, type TestSuite } from './suites.cjs';

const root = join(__dirname, '..');
const matches = (file: string, globs: readonly string[]): boolean => globs.some((glob) => matchesGlob(file, glob));

/** Every test file under test/, as a repository-relative path. */
function testFilesOnDisk(): string[] {
  return readdirSync(join(root, 'test'), { recursive: true, encoding: 'utf8' })
    .map((entry) => `test/${entry}`)
    .filter((file) => !file.includes('/node_modules/') && matches(file, ALL_TEST_FILES))
    .sort();
}

/** The suites a file belongs to: the default suite takes what no other suite names. */
function suitesOf(file: string): string[] {
  const named = [...SLOW_SUITES, E2E_SUITE].filter((suite) => matches(file, suite.files)).map((suite) => suite.name);
  if (matches(file, DEFAULT_SUITE.files) && !matches(file, DEFAULT_SUITE_EXCLUDES)) named.push(DEFAULT_SUITE.name);
  return named;
}

const scripts = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
const ciCommands = readFileSync(join(root, '.ci', 'run'), 'utf8').split('\n').map((line) => line.trim()).filter((line) => !line.startsWith('#'));

describe('test suites', () => {
  const files = testFilesOnDisk();

  it('find the test files', () => {
    expect(files).toContain('test/suites.test.ts');
    expect(files.some((file) => file.endsWith('.e2e.ts'))).toBe(true);
  });

  it('every test file belongs to exactly one suite', () => {
    const wrong = files.map((file) => ({ file, suites: suitesOf(file) })).filter((entry) => entry.suites.length !== 1);
    expect(wrong).toEqual([]);
  });

  it('every glob of a suite names at least one test file (a renamed file would otherwise leave its suite silently)', () => {
    const empty = [...SLOW_SUITES, E2E_SUITE, DEFAULT_SUITE].flatMap((suite: TestSuite) =>
      suite.files.filter((glob) => !files.some((file) => matchesGlob(file, glob))).map((glob) => `${suite.name}: ${glob}`));
    expect(empty).toEqual([]);
  });

  it('each slow suite has its npm script, running its vitest project, and npm run test:slow runs them all', () => {
    expect(scripts['test']).toBe('vitest run');
    expect(scripts['test:slow']).toBe('vitest run -c vitest.slow.config.mts');
    for (const suite of SLOW_SUITES) expect(scripts[`test:${suite.name}`], suite.name).toBe(`vitest run -c vitest.slow.config.mts --project ${suite.name}`);
    expect(scripts['test:e2e']).toBe('vitest run -c vitest.e2e.config.mts');
  });

  it('.ci/run runs npm test, the slow suites, the fuzz properties at full size, the end-to-end suite and the sanitizer run', () => {
    for (const command of ['npm test', 'npm run test:slow', 'npm run test:fuzz', 'npm run test:e2e', 'npm run test:asan']) {
      expect(ciCommands, command).toContain(command);
    }
  });
});
