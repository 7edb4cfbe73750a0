/**
 * `--report-file PATH`: the final one-line reason, written once at the end (in Kubernetes,
 * `/dev/termination-log`, which `kubectl describe pod` shows). A failure to write it is logged,
 * never allowed to change the exit code.
 */

import { writeFileSync } from 'node:fs';
import type { Logger } from './logger';
import { escapeForTerminal } from './terminal-text';

/** Write `line` (one line, control characters escaped, plus a newline) to `path`, replacing what was there. */
export function writeReportFile(path: string, line: string, logger: Logger): void {
  try {
    writeFileSync(path, `${escapeForTerminal(line.replace(/\r?\n/g, ' | '))}\n`);
  } catch (error) {
    logger.error(`--report-file ${JSON.stringify(path)}: cannot write: ${error instanceof Error ? error.message : String(error)}`);
  }
}
