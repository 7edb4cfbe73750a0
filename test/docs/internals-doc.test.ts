/**
 * The contributor's guide (docs/internals.md, and CONTRIBUTING.md which points to it) cannot
 * drift from the tree: every repository path it names in backticks exists (a glob such as
 * `sim/exports_*.cc` must match a file), and it keeps the layer map and the four recipes.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, matchesGlob } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = join(__dirname, '..', '..');
const GUIDES = ['docs/internals.md', 'CONTRIBUTING.md'];

/** A backticked word that names a file or folder of the repository: relative, with a folder or a file extension. */
function isRepositoryPath(word: string): boolean {
  if (!/^[\w.-]+(\/[\w.*-]+)*\/?$/.test(word)) return false;
  return word.includes('/') || /\.(md|ts|mts|cts|cjs|mjs|js|json|cc|h|c|gyp|txt|sh)$/.test(word);
}

/** The repository paths named in backticks in `markdown`, in order of first mention. */
function pathsNamedIn(markdown: string): string[] {
  const words = [...markdown.matchAll(/`([^`\n]+)`/g)].map((match) => match[1] ?? '');
  return [...new Set(words.filter(isRepositoryPath))];
}

/** Whether `path` (a glob in its last part allowed) names something in the repository. */
function existsInRepository(path: string): boolean {
  if (!path.includes('*')) return existsSync(join(root, path));
  const folder = dirname(path);
  if (!existsSync(join(root, folder))) return false;
  return readdirSync(join(root, folder)).some((entry) => matchesGlob(`${folder}/${entry}`, path));
}

/** The paths of `markdown` that name nothing in the repository. */
function missingPaths(markdown: string): string[] {
  return pathsNamedIn(markdown).filter((path) => !existsInRepository(path));
}

const guide = readFileSync(join(root, 'docs', 'internals.md'), 'utf8');

describe("the contributor's guide", () => {
  it('names only paths that exist in the repository', () => {
    for (const file of GUIDES) {
      const markdown = readFileSync(join(root, file), 'utf8');
      expect({ file, missing: missingPaths(markdown) }).toEqual({ file, missing: [] });
    }
    // The guide is mostly lists of files: a check that found few paths read it wrong.
    expect(pathsNamedIn(guide).length).toBeGreaterThan(60);
  });

  it('the path check reports a path or glob that names nothing, and passes over words that are no paths', () => {
    const sample = 'see `src/no-such-file.ts`, `sim/exports_*.cc`, `sim/no_such_*.cc`, `native/readings.h`, `maxUsed`, `--max-used`, `npm test`, `/dev/shm`';
    expect(pathsNamedIn(sample)).toEqual(['src/no-such-file.ts', 'sim/exports_*.cc', 'sim/no_such_*.cc', 'native/readings.h']);
    expect(missingPaths(sample)).toEqual(['src/no-such-file.ts', 'sim/no_such_*.cc']);
  });

  it('holds the layer map and the four recipes', () => {
    const headings = [...guide.matchAll(/^#{2,3} (.+)$/gm)].map((match) => match[1]);
    expect(headings).toEqual(
      expect.arrayContaining([
        'The layer map',
        'Recipe: add an NVML field (a per-device figure of a snapshot)',
        'Recipe: add a criterion flag',
        'Recipe: add a holder class',
        'Recipe: add a command',
        'Tests',
      ]),
    );
  });

  it('is linked from the README and from CONTRIBUTING.md', () => {
    expect(readFileSync(join(root, 'README.md'), 'utf8')).toContain('[docs/internals.md](docs/internals.md)');
    expect(readFileSync(join(root, 'CONTRIBUTING.md'), 'utf8')).toContain('docs/internals.md');
  });
});
