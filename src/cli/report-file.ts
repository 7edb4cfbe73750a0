/**
 * `--report-file PATH`: the final one-line reason, written once at the end (in Kubernetes,
 * `/dev/termination-log`, which `kubectl describe pod` shows). The file is written in place (it
 * may be a bind mount, which a rename cannot replace) through src/host/safe-file.ts: no link is
 * followed, a FIFO cannot block the open, the directories are proved safe. A failure to write it
 * is logged, never allowed to change the exit code.
 */

import { writeFileInPlace } from '../host/safe-file';
import type { Logger } from './logger';
import { escapeForTerminal } from './terminal-text';

/** Write `line` (one line, control characters escaped, plus a newline) to `path`, replacing what was there. */
export function writeReportFile(path: string, line: string, logger: Logger): void {
  try {
    writeFileInPlace(path, `${escapeForTerminal(line.replace(/\r?\n/g, ' | '))}\n`, { mode: 0o644 });
  } catch (error) {
    logger.error(`--report-file ${JSON.stringify(path)}: cannot write: ${error instanceof Error ? error.message : String(error)}`);
  }
}
