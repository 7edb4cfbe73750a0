/**
 * `gpugate completion bash|zsh`, loaded into the real shells: bash sources the script and its
 * completion function is driven through COMP_WORDS / COMP_CWORD exactly as readline does, offering
 * each command's flags from the option table, the choices of a flag's value, files for a PATH, a
 * command after `wait --`; zsh parses the script (`zsh -n`), registers it with compinit, and hands
 * _arguments every flag of each command. zsh missing makes its tests skip, saying why.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { COMMAND_ARGUMENTS, COMMAND_NAMES, optionsFor, type CommandName } from '../../src/cli/option-table';
import { cliPath, runCli } from '../helpers/cli';
import { TmuxShell } from '../helpers/tmux-shell';

const work = mkdtempSync(join(tmpdir(), 'gpugate-completion-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A folder to complete in: a directory of scenarios, a directory of units, and a file beside it. */
function pathsToComplete(): string {
  const dir = mkdtempSync(join(work, 'paths-'));
  mkdirSync(join(dir, 'scenarios'));
  writeFileSync(join(dir, 'scenarios', 'race.json'), '{}');
  mkdirSync(join(dir, 'units'));
  writeFileSync(join(dir, 'unit-notes.txt'), '');
  return dir;
}

/**
 * Types `line`, presses Tab, then types a marker: the screen then shows what completion made of
 * the line, trailing space included (`scenarios/@` against `race.json @`). Clears the line after.
 */
async function completedLine(shell: TmuxShell, line: string): Promise<string> {
  shell.type(line);
  shell.press('Tab');
  shell.type('@');
  const screen = await shell.waitFor(/@$/m);
  shell.press('C-u');
  const typed = screen.split('\n').filter((row) => row.endsWith('@')).pop() ?? '';
  return typed.slice(typed.indexOf('gpugate '));
}

/** What a shell lists when Tab is pressed twice on `line` (a menu of candidates and their descriptions). */
async function listing(shell: TmuxShell, line: string, expected: string): Promise<string> {
  shell.type(line);
  shell.press('Tab', 'Tab');
  const screen = await shell.waitFor(expected);
  shell.press('C-c');
  return screen;
}

function flagsOf(command: CommandName): string[] {
  return optionsFor(command).flatMap((spec) => [`--${spec.name}`, ...(spec.short === undefined ? [] : [`-${spec.short}`])]).sort();
}

let bashScript: string | null = null;

/**
 * `gpugate completion bash`, printed once for the file into a file of its own: every completion
 * below sources the same text, and one run of the command answers them all (loading it as users
 * do, from `source <(gpugate completion bash)`, is tested on its own below).
 */
function bashScriptFile(): string {
  if (bashScript !== null) return bashScript;
  const r = spawnSync(process.execPath, [cliPath(), 'completion', 'bash'], { encoding: 'utf8', timeout: 30_000 });
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  bashScript = join(work, 'gpugate-completion.bash');
  writeFileSync(bashScript, r.stdout);
  return bashScript;
}

/** Completes `words` (the last one being completed) in a bash that sourced `gpugate completion bash`. */
function bashComplete(words: string[]): string[] {
  const script = [
    `source ${JSON.stringify(bashScriptFile())}`,
    'COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()',
    '_gpugate',
    'printf "%s\\n" "${COMPREPLY[@]}"',
  ].join('\n');
  const r = spawnSync('bash', ['-c', script, 'bash', ...words], { encoding: 'utf8', timeout: 30_000 });
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  return r.stdout.split('\n').filter((line) => line !== '').sort();
}

describe('gpugate completion bash, loaded into bash', () => {
  it('registers a completion function for gpugate', () => {
    const r = spawnSync('bash', ['-c', `source <(${JSON.stringify(process.execPath)} ${JSON.stringify(cliPath())} completion bash); complete -p gpugate`], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('complete -F _gpugate gpugate');
  });

  it('completes the command name', () => {
    expect(bashComplete(['gpugate', 'sta'])).toEqual(['status']);
    expect(bashComplete(['gpugate', ''])).toEqual([...COMMAND_NAMES, '--help', '--version'].sort());
  });

  it("offers exactly each command's flags from the option table", () => {
    for (const command of COMMAND_NAMES) expect(bashComplete(['gpugate', command, '-']), command).toEqual(flagsOf(command));
    expect(bashComplete(['gpugate', 'wait', '--st'])).toEqual(['--stable', '--stable-tolerance', '--stale'].sort());
    expect(bashComplete(['gpugate', 'check', '--ti'])).toEqual([]);
  });

  it("completes a flag's value: its choices, files for a PATH, nothing for a size", () => {
    expect(bashComplete(['gpugate', 'wait', '--stale', ''])).toEqual(['fail', 'ignore', 'report']);
    expect(bashComplete(['gpugate', 'holders', '--format', 'p'])).toEqual(['prometheus']);
    // --format is declared twice (report commands, select): each command completes its own choices.
    expect(bashComplete(['gpugate', 'select', '--format', ''])).toEqual(['env', 'json', 'list']);
    expect(bashComplete(['gpugate', 'status', '--format', ''])).toEqual(['json', 'prometheus', 'text']);
    writeFileSync(join(work, 'libnvidia-ml.so.1'), '');
    expect(bashComplete(['gpugate', 'status', '--library', join(work, 'libnv')])).toEqual([join(work, 'libnvidia-ml.so.1')]);
    expect(bashComplete(['gpugate', 'wait', '--min-free', ''])).toEqual([]);
    // A single choice is still a choice: --for completes the engines it accepts.
    expect(bashComplete(['gpugate', 'check', '--for', ''])).toEqual(['vllm']);
  });

  it('completes the shell of gpugate completion, and a command after wait --', () => {
    expect(bashComplete(['gpugate', 'completion', ''])).toEqual([...(COMMAND_ARGUMENTS.completion?.choices ?? [])].sort());
    expect(bashComplete(['gpugate', 'wait', '--min-free', '0.9', '--', 'bas'])).toContain('bash');
  });

  it('completes a path after each path flag, a directory with a / and no space after it', async () => {
    const dir = pathsToComplete();
    const shell = new TmuxShell(dir, ['bash', '--norc', '--noprofile'], 250, { PS1: '$ ' });
    try {
      shell.type(`source <(${JSON.stringify(process.execPath)} ${JSON.stringify(cliPath())} completion bash); echo load""ed`);
      shell.press('Enter');
      await shell.waitFor(/^loaded$/m);
      expect(await completedLine(shell, 'gpugate sim --scenario sce')).toBe('gpugate sim --scenario scenarios/@');
      expect(await completedLine(shell, 'gpugate sim --scenario scenarios/ra')).toBe('gpugate sim --scenario scenarios/race.json @');
      // DIR flags offer directories only: units/ although unit-notes.txt shares its start.
      expect(await completedLine(shell, 'gpugate doctor --unit-path uni')).toBe('gpugate doctor --unit-path units/@');
      expect(await completedLine(shell, 'gpugate systemd --unit a --write --root uni')).toBe('gpugate systemd --unit a --write --root units/@');
      expect(await completedLine(shell, 'gpugate status --format prometheus --output sce')).toBe('gpugate status --format prometheus --output scenarios/@');
    } finally {
      shell.stop();
    }
  });

  it('refuses a missing or unknown shell (exit 64), suggesting the nearest', async () => {
    expect((await runCli(['completion'])).code).toBe(64);
    const typo = await runCli(['completion', 'bsh']);
    expect(typo.code).toBe(64);
    expect(typo.stderr).toContain("unknown SHELL 'bsh' (did you mean 'bash'?)");
  });
});

const zsh = spawnSync('zsh', ['--version'], { encoding: 'utf8' });
const noZsh = zsh.error !== undefined || zsh.status !== 0 ? 'zsh is not installed (Debian package zsh)' : null;
if (noZsh !== null) console.warn(`skipping the zsh completion checks: ${noZsh}`);

describe.skipIf(noZsh !== null)('gpugate completion zsh, loaded into zsh', () => {
  const script = join(work, '_gpugate');

  it('parses (zsh -n) and registers _gpugate for gpugate with compinit', async () => {
    const run = await runCli(['completion', 'zsh']);
    expect(run.code).toBe(0);
    writeFileSync(script, run.stdout);
    const parse = spawnSync('zsh', ['-n', script], { encoding: 'utf8' });
    expect(parse.stderr).toBe('');
    expect(parse.status).toBe(0);
    const load = spawnSync('zsh', ['-f', '-c', `autoload -Uz compinit && compinit -D -u; source ${script}; print -r -- "$_comps[gpugate]"`],
      { encoding: 'utf8', env: { ...process.env, HOME: work } });
    expect(load.stderr).toBe('');
    expect(load.stdout.trim()).toBe('_gpugate');
  });

  it("hands _arguments every flag of each command, and _describe the commands", () => {
    for (const command of COMMAND_NAMES) {
      // _arguments and _describe stand in for zsh's own, printing what they are given.
      const code = `_arguments() { print -rl -- "$@" }; _describe() { print -rl -- describe "\${(@P)4}" }; source ${script};
        words=(gpugate ${command} -); CURRENT=3; _gpugate`;
      const r = spawnSync('zsh', ['-f', '-c', `compdef() { }; ${code}`], { encoding: 'utf8' });
      expect(r.stderr, command).toBe('');
      const given = r.stdout;
      for (const spec of optionsFor(command)) expect(given, `${command} --${spec.name}`).toContain(`--${spec.name}`);
      const describe = spawnSync('zsh', ['-f', '-c', `compdef() { }; _describe() { print -rl -- "\${(@P)4}" }; source ${script}; words=(gpugate ''); CURRENT=2; _gpugate`], { encoding: 'utf8' });
      expect(describe.stdout.split('\n').filter((l) => l !== '').map((l) => l.split(':')[0])).toEqual([...COMMAND_NAMES]);
    }
  });

  it('completes paths and lists whole descriptions in an interactive zsh', async () => {
    const dir = pathsToComplete();
    const run = await runCli(['completion', 'zsh']);
    writeFileSync(join(dir, '_gpugate'), run.stdout);
    const shell = new TmuxShell(dir, ['zsh', '-f'], 250, { HOME: dir, PS1: '$ ' });
    try {
      shell.type('autoload -Uz compinit && compinit -D -u && source ./_gpugate && echo load""ed');
      shell.press('Enter');
      await shell.waitFor(/^loaded$/m);
      expect(await completedLine(shell, 'gpugate sim --scenario sce')).toBe('gpugate sim --scenario scenarios/@');
      expect(await completedLine(shell, 'gpugate sim --scenario scenarios/ra')).toBe('gpugate sim --scenario scenarios/race.json @');
      expect(await completedLine(shell, 'gpugate systemd --unit-path uni')).toBe('gpugate systemd --unit-path units/@');
      // Descriptions keep their parentheses, colons and the text after them.
      const flags = await listing(shell, 'gpugate sim --', 'or now');
      expect(flags).toContain('simulator scenario to run (docs/scenarios.md)');
      expect(flags).toContain("the timeline's 0 ms: Unix milliseconds, an ISO 8601 UTC time, or now");
      const commands = await listing(shell, 'gpugate ', '(exit 0 / 75 / 69)');
      expect(commands).toContain('read-only health checks: driver, each GPU, kernel Xid messages, the host (exit 0 / 75 / 69)');
    } finally {
      shell.stop();
    }
  });
});
