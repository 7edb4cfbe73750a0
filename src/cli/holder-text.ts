/**
 * A holder's command line shortened for a table; who owns it in words (src/gate/owner-text.ts,
 * re-exported here for the command's renderers). JSON carries the same facts whole (json-result.ts).
 */

import { escapeForTerminal } from './terminal-text';

export { describeOwner } from '../gate/owner-text';
export { formatAge } from '../units';

/** How long a command line a table shows. */
export const COMMAND_TEXT_CHARS = 60;

/** The command line for a terminal: arguments joined by spaces, cut to `maxChars` with `…`, control characters escaped. */
export function shortCommand(argv: readonly string[] | null | undefined, maxChars: number = COMMAND_TEXT_CHARS): string | null {
  if (argv === null || argv === undefined || argv.length === 0) return null;
  const characters = Array.from(argv.join(' '));
  const cut = characters.length <= maxChars ? characters.join('') : `${characters.slice(0, maxChars - 1).join('')}…`;
  return escapeForTerminal(cut);
}
