/**
 * What every sub-command receives: its parsed flags, the wrapped command (for `wait -- CMD`),
 * the environment, and the log. Commands return their exit code; they never call process.exit.
 */

import type { Logger } from './logger';
import type { FlagValues } from './parse-command-line';

/** The input of one sub-command run. */
export interface CommandContext {
  values: FlagValues;
  /** Words after `--` (only `wait` accepts them). */
  wrapped: string[];
  env: NodeJS.ProcessEnv;
  logger: Logger;
  /** Where results go (human tables, JSON, prometheus text); a terminal says how wide it is. */
  stdout: { write(text: string): unknown; readonly isTTY?: boolean; readonly columns?: number | undefined };
  /** Whether stderr is the journal (priority prefixes are on). */
  journal: boolean;
}

/** A sub-command: resolves to the exit code. */
export type CommandRunner = (context: CommandContext) => Promise<number>;

/** Read a string flag. */
export function stringFlag(values: FlagValues, name: string): string | undefined {
  const value = values[name];
  return typeof value === 'string' ? value : undefined;
}

/** Read a boolean flag. */
export function booleanFlag(values: FlagValues, name: string): boolean {
  return values[name] === true;
}

/** Read a repeatable string flag (each value may itself be comma separated when `split`). */
export function listFlag(values: FlagValues, name: string): string[] {
  const value = values[name];
  if (Array.isArray(value)) return value;
  return typeof value === 'string' ? [value] : [];
}
