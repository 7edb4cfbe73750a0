/**
 * Where `--format prometheus` goes: stdout, or with `--output PATH` a file replaced atomically
 * through src/host/safe-file.ts (every directory level proved safe, a random temporary file in
 * the same directory, then rename, so node_exporter never reads half a file and no name another
 * user planted is ever followed). Whatever happens, an exposition is written: when reading NVML
 * fails, one that says so (`gpugate_up 0`), so an older file's numbers never pass for current
 * ones. The file being replaced also tells the UUID each GPU index had, the label of a GPU that
 * NVML has since lost.
 */

import { readRegularFile, replaceFile } from '../host/safe-file';
import type { CommandContext } from './command-context';
import type { SessionSettings } from './criteria-settings';
import { prometheusFailureText, uuidsFromExposition } from './prometheus-text';

/** An exposition gpugate wrote is far smaller: a larger file is not read for labels. */
const EXPOSITION_MAX_BYTES = 16 << 20;

/** The UUIDs recorded per GPU index in the file `--output` will replace (empty when there is none, or it is not a regular file). */
export function lastKnownUuids(settings: Pick<SessionSettings, 'output'>): Map<number, string> {
  if (settings.output === undefined) return new Map();
  try {
    const existing = readRegularFile(settings.output, EXPOSITION_MAX_BYTES);
    return existing === null ? new Map() : uuidsFromExposition(existing.text);
  } catch {
    return new Map();
  }
}

/** Write an exposition to `--output` (atomically, mode 0644 so node_exporter may read it) or stdout. */
export function writeExposition(settings: Pick<SessionSettings, 'output'>, context: Pick<CommandContext, 'stdout'>, text: string): void {
  const path = settings.output;
  if (path === undefined) {
    context.stdout.write(text);
    return;
  }
  replaceFile(path, text, { mode: 0o644 });
}

/** Run `body`; when it fails with `--format prometheus`, write the failure exposition, then rethrow. */
export async function withPrometheusFailure<T>(settings: SessionSettings, context: CommandContext, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (error) {
    if (settings.format === 'prometheus') {
      const e = error as { code?: unknown; message?: unknown };
      const failure = prometheusFailureText({
        code: typeof e.code === 'string' ? e.code : null,
        message: typeof e.message === 'string' ? e.message : String(error),
        timestampSeconds: Date.now() / 1000,
      });
      try {
        writeExposition(settings, context, failure);
      } catch (writeError) {
        context.logger.error(`--output ${JSON.stringify(settings.output)}: cannot write: ${writeError instanceof Error ? writeError.message : String(writeError)}`);
      }
    }
    throw error;
  }
}
