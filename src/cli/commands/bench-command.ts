/**
 * `gpugate bench`: this host's poll latency through gpugate against nvidia-smi. The flags are
 * parsed here, the measure is the library's (src/bench/run-bench.ts), the table is src/cli/bench-text.ts.
 */

import { runBench as measureBench, type BenchOptions } from '../../bench/run-bench';
import { UsageError } from '../../usage-error';
import { parseDuration } from '../../units';
import { formatBenchResult } from '../bench-text';
import type { CommandContext } from '../command-context';
import { commandDocument } from '../json-envelope';

/** The flags of `gpugate bench` as the command line gives them (strings as typed). */
export interface BenchCommandValues {
  /** `--iterations N` (default 200). */
  iterations?: string | boolean | string[] | undefined;
  /** `--duration DUR`, e.g. `20s` (default 20s). */
  duration?: string | boolean | string[] | undefined;
  /** `--json`: print one JSON object instead of the table. */
  json?: string | boolean | string[] | undefined;
  /** `--library PATH`. */
  library?: string | boolean | string[] | undefined;
  /** `--nvml-timeout DUR`. */
  'nvml-timeout'?: string | boolean | string[] | undefined;
}

function flagText(values: BenchCommandValues, name: keyof BenchCommandValues): string | undefined {
  const value = values[name];
  return typeof value === 'string' ? value : undefined;
}

/**
 * `gpugate bench` end to end: parses its flags (a bad value throws a UsageError naming the flag,
 * before NVML is touched), measures with the library's runBench, writes the table (or `--json`)
 * to `out` and resolves to exit code 0. NVML failures propagate as NvmlError for the CLI's usual
 * exit-code mapping.
 */
export async function runBenchCommand(values: BenchCommandValues, out: { write(text: string): unknown }, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const options: BenchOptions = { env };
  const iterationsText = flagText(values, 'iterations');
  if (iterationsText !== undefined) {
    if (!/^[1-9][0-9]*$/.test(iterationsText) || Number(iterationsText) > 10_000_000) {
      throw new UsageError(iterationsText, 'an integer from 1 to 10000000', `--iterations ${JSON.stringify(iterationsText)} is invalid: expected an integer from 1 to 10000000`);
    }
    options.iterations = Number(iterationsText);
  }
  const durationText = flagText(values, 'duration');
  if (durationText !== undefined) {
    try {
      options.durationMs = parseDuration(durationText);
    } catch (error) {
      throw new UsageError(durationText, 'a duration such as 500ms, 20s or 2m', `--duration: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (options.durationMs <= 0 || options.durationMs > 3_600_000) {
      throw new UsageError(durationText, 'a duration above 0 and at most 1h', `--duration ${JSON.stringify(durationText)} is invalid: expected a duration above 0 and at most 1h`);
    }
  }
  const timeoutText = flagText(values, 'nvml-timeout');
  if (timeoutText !== undefined) {
    try {
      options.callTimeoutMs = parseDuration(timeoutText);
    } catch (error) {
      throw new UsageError(timeoutText, 'a duration such as 10s', `--nvml-timeout: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (options.callTimeoutMs <= 0) {
      throw new UsageError(timeoutText, 'a duration above 0', `--nvml-timeout ${JSON.stringify(timeoutText)} is invalid: expected a duration above 0`);
    }
  }
  const library = flagText(values, 'library');
  if (library !== undefined) options.libraryPath = library;
  const result = await measureBench(options);
  if (values.json === true) out.write(commandDocument({ command: 'bench', result: 'ok', exitCode: 0 }, result));
  else out.write(formatBenchResult(result));
  return 0;
}

/** Run `gpugate bench`. */
export async function runBench(context: CommandContext): Promise<number> {
  return runBenchCommand(context.values, context.stdout, context.env);
}
