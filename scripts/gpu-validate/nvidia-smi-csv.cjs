'use strict';
/**
 * Parses nvidia-smi's `--format=csv` output (with its header line) into objects keyed by the
 * queried field names, with sizes turned into bytes. Handles nvidia-smi's notations for missing
 * values ('[N/A]', '[Not Supported]', '[Insufficient Permissions]', 'N/A') as null.
 */

const MIB = 1024 * 1024;

/** `memory.total [MiB]` -> { field: 'memory.total', unit: 'MiB' }. */
function parseHeaderCell(cell) {
  const match = /^(.*?)\s*(?:\[(\w+)\])?$/.exec(cell.trim());
  return { field: match?.[1] ?? cell.trim(), unit: match?.[2] ?? null };
}

function parseValue(text, unit) {
  const value = text.trim();
  if (/^\[.*\]$/.test(value) || value === 'N/A') return null;
  if (unit === 'MiB') {
    const match = /^(\d+(?:\.\d+)?)(?:\s*MiB)?$/.exec(value);
    if (match === null) throw new Error(`expected a size in MiB, got ${JSON.stringify(value)}`);
    return Math.round(Number(match[1]) * MIB);
  }
  return value;
}

/**
 * Parses CSV text with a header; returns one object per data row. Field values are strings,
 * except MiB fields (bytes as numbers, nvidia-smi's MiB resolution) and missing ones (null).
 * The name column may contain no comma in practice; cells are split on ', ' like nvidia-smi writes.
 */
function parseNvidiaSmiCsv(text) {
  const lines = text.split('\n').map((l) => l.trimEnd()).filter((l) => l !== '');
  if (lines.length === 0) throw new Error('nvidia-smi printed nothing (expected a CSV header line)');
  const header = lines[0].split(',').map(parseHeaderCell);
  return lines.slice(1).map((line, row) => {
    const cells = line.split(', ');
    if (cells.length !== header.length) {
      throw new Error(`nvidia-smi CSV row ${row + 1} has ${cells.length} cells, header has ${header.length}: ${JSON.stringify(line)}`);
    }
    const record = {};
    header.forEach((h, i) => {
      record[h.field] = parseValue(cells[i] ?? '', h.unit);
    });
    return record;
  });
}

module.exports = { parseNvidiaSmiCsv };
