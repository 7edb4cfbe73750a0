/**
 * `gpugate completion bash|zsh`: prints the shell completion script (src/cli/completion-script.ts).
 */

import type { CommandContext } from '../command-context';
import { stringFlag } from '../command-context';
import { bashCompletion, zshCompletion } from '../completion-script';
import { ExitCode } from '../exit-codes';

/** Run `gpugate completion`. */
export async function runCompletion(context: CommandContext): Promise<number> {
  const shell = stringFlag(context.values, 'shell');
  context.stdout.write(shell === 'zsh' ? zshCompletion() : bashCompletion());
  return ExitCode.ok;
}
