/**
 * `gpugate check`: one sample against the criteria, no waiting and no stability: exit 0 when
 * every selected GPU is acceptable now, 75 when not (for Slurm prologs and health checks).
 */

import type { CommandContext } from '../command-context';
import { parseCriteriaSettings } from '../criteria-settings';
import { runGateCommand } from '../gate-command';

/** Run `gpugate check`. */
export async function runCheck(context: CommandContext): Promise<number> {
  return runGateCommand('check', context, parseCriteriaSettings('check', context.values));
}
