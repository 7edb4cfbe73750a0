/**
 * `gpugate bench`: this host's poll latency through gpugate against nvidia-smi (src/bench.ts).
 */

import type { CommandContext } from '../command-context';

/** Run `gpugate bench`. */
export async function runBench(context: CommandContext): Promise<number> {
  const { runBenchCommand } = require('../../bench') as typeof import('../../bench');
  return runBenchCommand(context.values, context.stdout, context.env);
}
