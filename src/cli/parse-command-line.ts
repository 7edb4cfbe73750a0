/**
 * Turns `process.argv` into a command name, its flag values and the wrapped command (the
 * words after `--` in `gpugate wait [options] -- CMD ARGS…`), with `node:util` parseArgs in
 * strict mode. Every problem becomes a usage error (exit 64) naming the offending word.
 */

import { parseArgs } from 'node:util';
import { CliError } from './cli-error';
import { ExitCode } from './exit-codes';
import { nearestWord } from '../nearest-word';
import { COMMAND_ARGUMENTS, COMMAND_NAMES, OPTION_TABLE, optionsFor, type CommandName } from './option-table';

/** Flag values by long name: strings, booleans, or string lists for repeatable flags. */
export type FlagValues = Record<string, string | boolean | string[] | undefined>;

/** What the command line asks for. */
export type ParsedCommandLine =
  | { kind: 'top-help' }
  | { kind: 'version' }
  | { kind: 'command'; command: CommandName; values: FlagValues; wrapped: string[] };

/** A usage error (exit 64) with a hint where to look. */
export function usageError(message: string, command?: CommandName): CliError {
  const hint = command === undefined ? 'gpugate --help' : `gpugate ${command} --help`;
  return new CliError(`${message} (see ${hint})`, ExitCode.usage, 'usage-error');
}

/** Parse the arguments after the program name. Throws a {@link CliError} with exit 64 on bad input. */
export function parseCommandLine(argv: readonly string[]): ParsedCommandLine {
  const first = argv[0];
  if (first === undefined) throw usageError('missing command: expected one of ' + COMMAND_NAMES.join(', '));
  if (first === '--help' || first === '-h') return { kind: 'top-help' };
  if (first === '--version' || first === '-V') {
    if (argv.length > 1) throw usageError(`unexpected argument '${String(argv[1])}' after --version`);
    return { kind: 'version' };
  }
  if (first === 'help') {
    const topic = argv[1];
    if (topic === undefined) return { kind: 'top-help' };
    if (!isCommandName(topic)) throw usageError(`unknown command '${topic}'${commandHint(topic)}: expected one of ${COMMAND_NAMES.join(', ')}`);
    return { kind: 'command', command: topic, values: { help: true }, wrapped: [] };
  }
  if (!isCommandName(first)) {
    const what = first.startsWith('-') ? `option '${first}' before the command` : `command '${first}'${commandHint(first)}`;
    throw usageError(`unknown ${what}: expected one of ${COMMAND_NAMES.join(', ')}`);
  }
  const command = first;
  const rest = argv.slice(1);
  const separator = rest.indexOf('--');
  const flags = separator === -1 ? rest : rest.slice(0, separator);
  const wrapped = separator === -1 ? [] : rest.slice(separator + 1);

  const specs = optionsFor(command);
  const options: Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }> = {};
  for (const spec of specs) {
    options[spec.name] = {
      type: spec.type,
      ...(spec.short !== undefined ? { short: spec.short } : {}),
      ...(spec.multiple === true ? { multiple: true } : {}),
    };
  }
  let parsed: { values: FlagValues; positionals: string[] };
  try {
    parsed = parseArgs({ args: flags, options, strict: true, allowPositionals: true }) as {
      values: FlagValues;
      positionals: string[];
    };
  } catch (error) {
    throw usageError(describeParseError(error, command), command);
  }
  if (parsed.values.help === true) return { kind: 'command', command, values: parsed.values, wrapped: [] };
  const argument = COMMAND_ARGUMENTS[command];
  if (argument !== undefined) {
    const [word, extra] = parsed.positionals;
    const expected = `expected ${argument.choices.join(' or ')}`;
    if (word === undefined) throw usageError(`gpugate ${command}: missing ${argument.name}: ${expected}`, command);
    if (!argument.choices.includes(word)) {
      const near = nearestWord(word, argument.choices);
      throw usageError(`gpugate ${command}: unknown ${argument.name} '${word}'${near === null ? '' : ` (did you mean '${near}'?)`}: ${expected}`, command);
    }
    if (extra !== undefined) throw usageError(`gpugate ${command}: unexpected argument '${extra}'`, command);
    parsed.values[argument.name.toLowerCase()] = word;
    parsed.positionals = [];
  }
  const stray = parsed.positionals[0];
  if (stray !== undefined) {
    const hint = command === 'wait' ? " (put the command to run after '--')" : '';
    throw usageError(`gpugate ${command}: unexpected argument '${stray}'${hint}`, command);
  }
  if (separator !== -1 && command !== 'wait') {
    throw usageError(`gpugate ${command}: '--' and a command to run are accepted only by 'gpugate wait'`, command);
  }
  if (separator !== -1 && wrapped.length === 0) {
    throw usageError(`gpugate ${command}: expected a command to run after '--'`, command);
  }
  return { kind: 'command', command, values: parsed.values, wrapped };
}

/** `; did you mean 'status'?` for a mistyped command, or nothing. */
function commandHint(typed: string): string {
  const near = nearestWord(typed, COMMAND_NAMES);
  return near === null ? '' : ` (did you mean '${near}'?)`;
}

/** For an unknown flag: the nearest flag this command takes, or the commands that take it. */
function optionHint(typed: string, command: CommandName): string {
  const name = typed.replace(/^-+/, '').split('=')[0] ?? '';
  const elsewhere = OPTION_TABLE.find((spec) => spec.name === name || (spec.short !== undefined && typed === `-${spec.short}`));
  if (elsewhere !== undefined && !elsewhere.commands.includes(command)) {
    return `: --${elsewhere.name} is an option of ${elsewhere.commands.map((c) => `'gpugate ${c}'`).join(', ')}, not of 'gpugate ${command}'`;
  }
  const near = name.length < 2 ? null : nearestWord(name, optionsFor(command).map((spec) => spec.name));
  return near === null ? '' : ` (did you mean '--${near}'?)`;
}

function isCommandName(word: string): word is CommandName {
  return (COMMAND_NAMES as readonly string[]).includes(word);
}

/** Reword parseArgs' messages so they name the command and the flag. */
function describeParseError(error: unknown, command: CommandName): string {
  const e = error as { code?: unknown; message?: unknown };
  const message = typeof e.message === 'string' ? e.message : String(error);
  const quoted = /'(-[^']*)'/.exec(message)?.[1];
  switch (e.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `gpugate ${command}: unknown option '${quoted ?? message}'${quoted === undefined ? '' : optionHint(quoted, command)}`;
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      if (message.includes('does not take')) return `gpugate ${command}: option '${flagName(quoted)}' takes no value`;
      return `gpugate ${command}: option '${flagName(quoted)}' needs a value (to pass a value starting with '-', write ${flagName(quoted)}=VALUE)`;
    default:
      return `gpugate ${command}: ${message}`;
  }
}

function flagName(quoted: string | undefined): string {
  // parseArgs quotes "-q, --quiet" or "--timeout <value>": keep the long name.
  if (quoted === undefined) return '?';
  const long = /--[\w-]+/.exec(quoted)?.[0];
  return long ?? quoted;
}
