/**
 * Where `--format prometheus` goes: stdout, or with `--output PATH` a file replaced atomically (a
 * temporary file in the same directory, then rename, so node_exporter never reads half a file).
 * Whatever happens, an exposition is written: when reading NVML fails, one that says so
 * (`gpugate_up 0`), so an older file's numbers never pass for current ones. The file being
 * replaced also tells the UUID each GPU index had, the label of a GPU that NVML has since lost.
 */

import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import type { CommandContext } from './command-context';
import type { SessionSettings } from './criteria-settings';
import { prometheusFailureText, uuidsFromExposition } from './prometheus-text';

/** The UUIDs recorded per GPU index in the file `--output` will replace (empty when there is none). */
export function lastKnownUuids(settings: Pick<SessionSettings, 'output'>): Map<number, string> {
  if (settings.output === undefined) return new Map();
  try {
    return uuidsFromExposition(readFileSync(settings.output, 'utf8'));
  } catch {
    return new Map();
  }
}

/** Write an exposition to `--output` (atomically) or stdout. */
export function writeExposition(settings: Pick<SessionSettings, 'output'>, context: Pick<CommandContext, 'stdout'>, text: string): void {
  const path = settings.output;
  if (path === undefined) {
    context.stdout.write(text);
    return;
  }
  const temporary = `${path}.tmp-${process.pid}`;
  try {
    writeFileSync(temporary, text, { mode: 0o644 });
    renameSync(temporary, path);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw error;
  }
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
