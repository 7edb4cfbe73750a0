/**
 * `gpugate bench`: this host's poll latency through gpugate against nvidia-smi (src/bench.ts).
 */

import type { CommandContext } from '../command-context';
import { withJsonError } from '../json-error';

/** Run `gpugate bench`. */
export async function runBench(context: CommandContext): Promise<number> {
  const { runBenchCommand } = require('../../bench') as typeof import('../../bench');
  return withJsonError('bench', context.values.json === true, context, () => runBenchCommand(context.values, context.stdout, context.env));
}
