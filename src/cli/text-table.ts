/**
 * Plain-text tables for `status` and `holders`: columns padded to their widest cell, two
 * spaces apart, no trailing blanks. Cells hold process and GPU names: each is escaped
 * (escapeForTerminal) before it is measured.
 */

import { escapeForTerminal } from './terminal-text';

/** Render rows (the first is the header) as aligned text lines. */
export function textTable(given: ReadonlyArray<ReadonlyArray<string>>): string {
  const rows = given.map((row) => row.map(escapeForTerminal));
  const widths: number[] = [];
  for (const row of rows) {
    row.forEach((cell, i) => {
      widths[i] = Math.max(widths[i] ?? 0, cell.length);
    });
  }
  return rows
    .map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  ').trimEnd())
    .join('\n');
}
