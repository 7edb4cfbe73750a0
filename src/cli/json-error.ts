/**
 * `--json` promises one document on stdout on every exit. A command prints its own document when
 * it reaches an outcome; this file holds the document printed for it when it does not: the command
 * line did not parse, a flag's value was refused, or the command failed before its outcome. Each
 * has the shape of its command's schema (schemas/), with `result` and `exitCode` as the process ends.
 */

import { CliError } from './cli-error';
import type { ErrorJson } from './error-json';
import { ExitCode } from './exit-codes';
import { commandDocument, type JsonEnvelope } from './json-envelope';
import type { ResultJson } from './json-result';
import { COMMAND_NAMES, optionsFor, type CommandName } from './option-table';

export type { ErrorJson } from './error-json';

/**
 * The command whose `--json` (or `--format json`) is on the command line, or null. Read from the
 * raw words, not the parse: it must hold when the parse itself fails (an unknown flag before or
 * after `--json`). Words after `--` belong to the wrapped command.
 */
export function jsonRequested(argv: readonly string[]): CommandName | null {
  const command = COMMAND_NAMES.find((name) => name === argv[0]);
  if (command === undefined || !optionsFor(command).some((spec) => spec.name === 'json')) return null;
  const separator = argv.indexOf('--');
  const words = separator === -1 ? argv.slice(1) : argv.slice(1, separator);
  const asked = words.some((word, i) => word === '--json' || word === '--format=json' || (word === '--format' && words[i + 1] === 'json'));
  return asked ? command : null;
}

/** An error's JSON form; null for none. */
export function errorJson(error: unknown): ErrorJson | null {
  if (error === null || error === undefined) return null;
  const e = error as { name?: unknown; code?: unknown; message?: unknown };
  return {
    name: typeof e.name === 'string' ? e.name : 'Error',
    code: typeof e.code === 'string' ? e.code : null,
    message: typeof e.message === 'string' ? e.message : String(error),
  };
}

/** The result word of the gate's and select's documents for a failure that ended with `exitCode`. */
const RESULT_OF_EXIT_CODE: Readonly<Record<number, string>> = {
  [ExitCode.usage]: 'usage-error',
  [ExitCode.unavailable]: 'unavailable',
  [ExitCode.software]: 'internal-error',
  [ExitCode.osError]: 'os-error',
  [ExitCode.tempFail]: 'timeout',
  [ExitCode.noPermission]: 'no-permission',
  [ExitCode.config]: 'config-error',
  [ExitCode.sighup]: 'interrupted',
  [ExitCode.sigint]: 'interrupted',
  [ExitCode.sigterm]: 'interrupted',
};

function resultWord(error: unknown, exitCode: number): string {
  if (error instanceof CliError) return error.result;
  return RESULT_OF_EXIT_CODE[exitCode] ?? 'internal-error';
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The fields after the envelope of `command`'s document when `error` ended it before its outcome. */
function failureFields(command: CommandName, error: unknown): object {
  switch (command) {
    case 'wait':
    case 'check': {
      const fields: Omit<ResultJson, keyof JsonEnvelope> = {
        reason: messageOf(error),
        elapsedMs: 0,
        polls: 0,
        selection: null,
        library: null,
        gpus: [],
        stale: { holders: [], shm: null },
        actions: { signals: [], shm: [] },
        error: errorJson(error),
      };
      return fields;
    }
    case 'select':
      return {
        reason: messageOf(error),
        elapsedMs: 0,
        polls: 0,
        // Unknown when the command line did not parse.
        count: null,
        cudaVisibleDevices: null,
        selection: null,
        library: null,
        gpus: [],
        candidates: [],
        error: errorJson(error),
      };
    default:
      return { error: errorJson(error) };
  }
}

/** The document (one line) of `command` when `error` ended it with `exitCode` before it printed its own. */
export function failureDocument(command: CommandName, error: unknown, exitCode: number): string {
  const result = command === 'wait' || command === 'check' || command === 'select' ? resultWord(error, exitCode) : 'error';
  return commandDocument({ command, result, exitCode }, failureFields(command, error));
}
