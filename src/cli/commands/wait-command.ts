/**
 * `gpugate wait`: poll until every selected GPU meets the criteria and is stable (exit 0), or
 * time out (exit 75); with `-- CMD ARGS…`, run CMD once free and exit with its status.
 */

import type { CommandContext } from '../command-context';
import { parseWaitSettings } from '../criteria-settings';
import { runGateCommand } from '../gate-command';

/** Run `gpugate wait`. */
export async function runWait(context: CommandContext): Promise<number> {
  return runGateCommand('wait', context, parseWaitSettings(context.values));
}
