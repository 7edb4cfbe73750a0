/**
 * `gpugate wait`: poll until every selected GPU meets the criteria and is stable (exit 0), or
 * time out (exit 75); with `-- CMD ARGS…`, run CMD once free and exit with its status.
 */

import type { CommandContext } from '../command-context';
import { parseWaitSettings } from '../criteria-settings';
import { runGate } from '../gate-run';

/** Run `gpugate wait`. */
export async function runWait(context: CommandContext): Promise<number> {
  return runGate('wait', context, parseWaitSettings(context.values));
}
