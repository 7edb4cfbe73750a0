/**
 * Plain-text tables for `status` and `holders`: columns padded to their widest cell, two
 * spaces apart, no trailing blanks. Cells hold process and GPU names: each is escaped
 * (escapeForTerminal) before it is measured.
 *
 * A table wider than the terminal is fitted to it, never cut mid-word: first the columns listed
 * as `fold` leave the table (the first listed first) while it is wider than the width (one that
 * may also wrap only while wrapping could not make it fit), and are shown under their row instead
 * (`    name value, name value`, wrapped), then the free-text columns listed as `wrap` wrap at
 * spaces onto further lines. Only a word longer than the width can still exceed it.
 */

import { escapeForTerminal } from './terminal-text';

/** How a table may be fitted to a width. */
export interface TableLayout {
  /** The widest a line may be; no limit when absent. */
  width?: number;
  /** Free-text columns that may wrap at spaces. */
  wrap?: readonly number[];
  /** Columns that may leave the table for a line under their row, the first listed first. */
  fold?: readonly number[];
  /** Columns aligned to the right (figures); the others align left. */
  alignRight?: readonly number[];
}

/** How far under its row a folded line starts, and its continuation lines. */
const FOLD_INDENT = '    ';
const FOLD_CONTINUATION = '      ';

/** `text` broken at spaces into lines of at most `width` (a longer word keeps a line of its own). */
export function wordWrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ').filter((part) => part !== '')) {
    if (line === '') line = word;
    else if (line.length + 1 + word.length <= width) line += ` ${word}`;
    else {
      lines.push(line);
      line = word;
    }
  }
  lines.push(line);
  return lines;
}

function longestWord(text: string): number {
  return Math.max(0, ...text.split(' ').map((word) => word.length));
}

/** Each row (the first is the header) as its block of text lines, fitted to `layout`. */
export function textTableBlocks(given: ReadonlyArray<ReadonlyArray<string>>, layout: TableLayout = {}): string[] {
  const rows = given.map((row) => row.map(escapeForTerminal));
  const columnCount = Math.max(0, ...rows.map((row) => row.length));
  const natural = Array.from({ length: columnCount }, (_, i) => Math.max(0, ...rows.map((row) => (row[i] ?? '').length)));
  const narrowest = natural.map((width, i) => (layout.wrap?.includes(i) === true ? Math.max(1, ...rows.map((row) => longestWord(row[i] ?? ''))) : width));
  const limit = layout.width ?? Number.POSITIVE_INFINITY;
  const lineWidth = (columns: readonly number[], widths: readonly number[]): number =>
    columns.reduce((sum, i) => sum + (widths[i] ?? 0), 0) + 2 * Math.max(0, columns.length - 1);

  let kept = Array.from({ length: columnCount }, (_, i) => i);
  const folded: number[] = [];
  for (const column of layout.fold ?? []) {
    // A column that can also wrap leaves only when wrapping cannot make the table fit.
    const fits = lineWidth(kept, layout.wrap?.includes(column) === true ? narrowest : natural) <= limit;
    if (fits) continue;
    kept = kept.filter((i) => i !== column);
    folded.push(column);
  }
  folded.sort((a, b) => a - b);
  // Shrink the free-text columns, in the order listed, by what the line is too wide.
  const widths = [...natural];
  let excess = lineWidth(kept, natural) - limit;
  for (const column of layout.wrap ?? []) {
    if (excess <= 0 || !kept.includes(column)) continue;
    const shrink = Math.min(excess, (natural[column] ?? 0) - (narrowest[column] ?? 0));
    widths[column] = (natural[column] ?? 0) - shrink;
    excess -= shrink;
  }

  const header = rows[0] ?? [];
  return rows.map((row, rowIndex) => {
    const cells = kept.map((i) => (layout.wrap?.includes(i) === true ? wordWrap(row[i] ?? '', widths[i] ?? 0) : [row[i] ?? '']));
    const height = Math.max(1, ...cells.map((lines) => lines.length));
    const lines: string[] = [];
    for (let line = 0; line < height; line++) {
      lines.push(cells.map((lines, k) => {
        const text = lines[line] ?? '';
        const width = widths[kept[k] ?? 0] ?? 0;
        if (layout.alignRight?.includes(kept[k] ?? -1) === true) return text.padStart(width);
        return k === cells.length - 1 ? text : text.padEnd(width);
      }).join('  ').trimEnd());
    }
    const foldedText = rowIndex === 0 ? '' : folded
      .filter((i) => row[i] !== undefined && row[i] !== '' && row[i] !== '-')
      .map((i) => `${(header[i] ?? '').toLowerCase()} ${row[i] ?? ''}`)
      .join(', ');
    if (foldedText !== '') {
      const wrapped = wordWrap(foldedText, Math.max(1, limit - FOLD_CONTINUATION.length));
      lines.push(...wrapped.map((text, i) => `${i === 0 ? FOLD_INDENT : FOLD_CONTINUATION}${text}`));
    }
    return lines.join('\n');
  });
}

/** Render rows (the first is the header) as aligned text lines, fitted to `layout`. */
export function textTable(given: ReadonlyArray<ReadonlyArray<string>>, layout: TableLayout = {}): string {
  return textTableBlocks(given, layout).join('\n');
}
