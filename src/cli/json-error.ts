/**
 * For `status` and `holders` with `--json`: when the command fails, still print one JSON object
 * (result, exitCode, error) on stdout, then let the error reach the exit-code mapping.
 */

import type { CommandContext } from './command-context';
import { exitCodeForError } from './exit-codes';
import { errorJson } from './json-result';
import { jsonDocument } from './json-document';

/** Run `body`; on failure with `json` set, print the error document and rethrow. */
export async function withJsonError<T>(command: string, json: boolean, context: CommandContext, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (error) {
    if (json) {
      const exitCode = exitCodeForError(error);
      context.stdout.write(jsonDocument({ command, result: 'error', exitCode, error: errorJson(error) }));
    }
    throw error;
  }
}
