/**
 * The envelope every command's `--json` document opens with: `schemaVersion` (json-document.ts),
 * then which command ran, its result word and the exit code, then the command's own fields. Every
 * command builds its document here, so the envelope's fields and their order are written once.
 */

import { jsonDocument } from './json-document';
import type { CommandName } from './option-table';

/** The fields every document carries after `schemaVersion`, in this order. */
export interface JsonEnvelope {
  command: CommandName;
  result: string;
  exitCode: number;
}

/** One command's document as one line of stdout: the envelope, then `fields`. */
export function commandDocument(envelope: JsonEnvelope, fields: object): string {
  return jsonDocument({ command: envelope.command, result: envelope.result, exitCode: envelope.exitCode, ...fields });
}
