/**
 * The claims of README.md and docs/cli.md, checked against the code they describe, so the docs
 * cannot drift: every `--flag` they name is a flag of gpugate (or of the other program named in
 * FOREIGN_FLAGS), and each `gpugate COMMAND … --flag` they show is one that COMMAND accepts; every
 * flag of the option table is documented; the exit codes of docs/cli.md's table and of README's
 * summary are exactly those of src/cli/exit-codes.ts; every name README's API section imports or
 * names is exported by the built package; every field of a JSON sample is in the shipped schemas.
 * Each check fails with the list of drifted claims.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ExitCode } from '../../src/cli/exit-codes';
import { COMMAND_NAMES, OPTION_TABLE, type CommandName } from '../../src/cli/option-table';
import { declaredExports } from '../helpers/declared-exports';
import { repoRoot } from '../helpers/sim';

const root = repoRoot();
const DOCS = ['README.md', 'docs/cli.md'] as const;
const text = (file: string): string => readFileSync(join(root, file), 'utf8');

/** Flags of other programs that the docs show, and whose they are. */
const FOREIGN_FLAGS: Readonly<Record<string, string>> = {
  'gpu-memory-utilization': "vLLM's",
  'model-path': "SGLang's",
  'disable-sigusr1': "node's",
  'query-gpu': "nvidia-smi's",
  now: "systemctl enable's",
  user: "unshare's", pid: "unshare's", fork: "unshare's", 'mount-proc': "unshare's",
  quick: "the benchmark harness's (npm run bench --)",
};

/** Flags of `gpugate` itself rather than of a command. */
const TOP_LEVEL_FLAGS = ['version', 'help'];

const FLAG = /(?<![\w-])--([a-z][a-z0-9-]*)/g;

/** The part of `from` up to the next level-`level` heading (or the end). */
function section(from: string, heading: string, level = 2): string {
  const start = from.indexOf(`\n${heading}\n`);
  expect(start, `heading ${heading}`).toBeGreaterThan(-1);
  const next = from.slice(start + heading.length + 2).search(new RegExp(`\\n#{1,${level}} `));
  return next === -1 ? from.slice(start) : from.slice(start, start + heading.length + 2 + next);
}

/** Every `gpugate COMMAND …` the docs show, with the flags given to COMMAND (up to a pipe, `;`, `&&`, `#`, a redirection or `--`). */
function invocations(markdown: string): Array<{ command: CommandName; flags: string[]; line: string }> {
  const found: Array<{ command: CommandName; flags: string[]; line: string }> = [];
  for (const line of markdown.split('\n')) {
    for (const match of line.matchAll(/(?<![\w/.-])gpugate ([a-z]+)\b([^`|;#>)]*)/g)) {
      const command = match[1] as CommandName;
      if (!COMMAND_NAMES.includes(command)) continue;
      const args = (match[2] ?? '').split(/ -- |&&/)[0] ?? '';
      found.push({ command, flags: [...args.matchAll(FLAG)].map((flag) => flag[1] as string), line: line.trim() });
    }
  }
  return found;
}

/** Each flag given to a command that does not take it, as a sentence. */
function misplacedFlags(markdown: string): string[] {
  return invocations(markdown).flatMap(({ command, flags, line }) => flags
    .filter((flag) => FOREIGN_FLAGS[flag] === undefined && flag !== 'help')
    .filter((flag) => !(OPTION_TABLE.find((spec) => spec.name === flag)?.commands.includes(command) ?? false))
    .map((flag) => `gpugate ${command} does not take --${flag}: ${line}`));
}

describe('claims of README.md and docs/cli.md', () => {
  const known = new Set([...OPTION_TABLE.map((spec) => spec.name), ...TOP_LEVEL_FLAGS]);

  it('reads a drifted invocation as drifted (the check below can fail)', () => {
    expect(misplacedFlags('Run `gpugate check --stable 5s --gpus 0 | tee log` and `gpugate status --json`.')).toEqual([
      'gpugate check does not take --stable: Run `gpugate check --stable 5s --gpus 0 | tee log` and `gpugate status --json`.',
    ]);
    expect(misplacedFlags('`gpugate wait --min-free 0.9 -- vllm serve --stable`')).toEqual([]);
  });

  it.each(DOCS)('%s names no flag that gpugate (or the program it belongs to) does not have', (file) => {
    const unknown = [...new Set([...text(file).matchAll(FLAG)].map((match) => match[1] as string))]
      .filter((flag) => !known.has(flag) && FOREIGN_FLAGS[flag] === undefined);
    expect(unknown, `flags ${file} names that exist nowhere`).toEqual([]);
  });

  it.each(DOCS)('%s gives each gpugate command only flags that command accepts', (file) => {
    expect(misplacedFlags(text(file))).toEqual([]);
  });

  it('shows enough invocations for the check above to mean something', () => {
    expect(invocations(text('docs/cli.md')).length).toBeGreaterThan(30);
    expect(invocations(text('README.md')).length).toBeGreaterThan(5);
  });

  it('documents every flag of the option table in docs/cli.md, for each command that takes it', () => {
    const cli = text('docs/cli.md');
    const tableRows = [...section(cli, '## Flags').matchAll(/^\| ([^|]*(?:\\\|[^|]*)*) \|/gm)].map((row) => row[1] as string).join('\n');
    const commandSection = (command: CommandName): string => {
      const heading = cli.split('\n').find((line) => line.startsWith(`### \`gpugate ${command}`));
      return heading === undefined ? '' : section(cli, heading, 3);
    };
    const undocumented = OPTION_TABLE.flatMap((spec) => spec.commands
      .filter((command) => !tableRows.includes(`--${spec.name}`) && !commandSection(command).includes(`--${spec.name}`))
      .map((command) => `--${spec.name} of gpugate ${command}`));
    expect(undocumented, 'flags neither in a row of "## Flags" nor in their command\'s section').toEqual([]);
  });

  it('lists in docs/cli.md\'s exit-code table exactly the codes of src/cli/exit-codes.ts', () => {
    const table = section(text('docs/cli.md'), '## Exit codes');
    const documented = [...table.matchAll(/^\| ([\d /]+) \|/gm)].flatMap((row) => (row[1] as string).split('/').map((code) => Number(code.trim())));
    expect(documented.sort((a, b) => a - b)).toEqual(Object.values(ExitCode).sort((a, b) => a - b));
  });

  it('sums up in README.md exactly the exit codes of src/cli/exit-codes.ts', () => {
    const readme = text('README.md');
    const summary = readme.slice(readme.indexOf('Exit codes: '), readme.indexOf('Every command, flag and output format'));
    const documented = [...summary.matchAll(/(?:Exit codes: |,\s+)(\d+(?:\/\d+)*) (?=[a-zA-Z])/g)]
      .flatMap((match) => (match[1] as string).split('/').map(Number));
    expect(documented.sort((a, b) => a - b)).toEqual(Object.values(ExitCode).sort((a, b) => a - b));
  });

  it('names in README.md\'s API section only what the built package exports', () => {
    const api = section(text('README.md'), '## The API');
    const exported = declaredExports();
    const imported = [...api.matchAll(/import \{([^}]+)\} from 'gpugate'/g)]
      .flatMap((match) => (match[1] as string).split(',').map((name) => name.trim().replace(/^type /, '')));
    const prose = api.replace(/^```[\s\S]*?^```/gm, '');
    // Class and type names anywhere in the prose (the platform's own, such as `TypeError`, are not
    // the package's claims); functions and constants where the table of exports names them.
    const pascal = [...prose.matchAll(/`([A-Z][a-z]\w*)`/g)].map((match) => match[1] as string).filter((name) => !(name in globalThis));
    const exportsTable = prose.slice(prose.indexOf('| name | what it does |'));
    const rows = exportsTable.slice(0, exportsTable.indexOf('\n\n'));
    const listed = [...rows.matchAll(/^\| ([^|]+) \|/gm)].flatMap((row) => [...(row[1] as string).matchAll(/`([A-Za-z_]\w*)[`(]/g)].map((match) => match[1] as string));
    const named = [...pascal, ...listed].filter((name) => !['name', 'class', 'code'].includes(name));
    expect(listed.length).toBeGreaterThan(20);
    expect(imported.length).toBeGreaterThan(3);
    const missing = [...new Set([...imported, ...named])].filter((name) => !exported.has(name));
    expect(missing, 'names README\'s API section uses that the package does not export').toEqual([]);
  });

  it.each(DOCS)('%s shows in its JSON samples only fields of the shipped schemas', (file) => {
    const properties = new Set<string>();
    const collect = (node: unknown): void => {
      if (Array.isArray(node)) node.forEach(collect);
      else if (typeof node === 'object' && node !== null) {
        for (const [key, value] of Object.entries(node)) {
          if (key === 'properties' && typeof value === 'object' && value !== null) Object.keys(value).forEach((name) => properties.add(name));
          collect(value);
        }
      }
    };
    for (const schema of readdirSync(join(root, 'schemas'))) collect(JSON.parse(readFileSync(join(root, 'schemas', schema), 'utf8')));
    const fenced = [...text(file).matchAll(/^```[a-z]*\n([\s\S]*?)^```/gm)].map((block) => block[1] as string);
    const fields = [...new Set(fenced.flatMap((block) => [...block.matchAll(/"([A-Za-z_]\w*)":/g)].map((match) => match[1] as string)))];
    const unknown = fields.filter((field) => !properties.has(field));
    expect(unknown, `fields ${file}'s JSON samples show that no schema has`).toEqual([]);
  });
});
