/**
 * "Did you mean …?" for a mistyped command, flag or option key: the known word nearest to what was typed, by
 * edit distance counting a swap of two neighbours as one edit (`stauts` → `status`), or the only
 * known word the typed one starts (`hold` → `holders`). Nothing when no word is close.
 */

/** Optimal string alignment distance: insertions, deletions, substitutions, adjacent swaps. */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[][] = Array.from({ length: rows }, (_, i) => Array.from({ length: cols }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i < rows; i += 1) {
    for (let j = 1; j < cols; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      const row = d[i] as number[];
      const above = d[i - 1] as number[];
      row[j] = Math.min((above[j] as number) + 1, (row[j - 1] as number) + 1, (above[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        row[j] = Math.min(row[j] as number, ((d[i - 2] as number[])[j - 2] as number) + 1);
      }
    }
  }
  return (d[rows - 1] as number[])[cols - 1] as number;
}

/** The known word closest to `typed`, or null when none is close enough to suggest. */
export function nearestWord(typed: string, known: readonly string[]): string | null {
  const lower = typed.toLowerCase();
  const prefixed = known.filter((word) => lower.length >= 2 && word.startsWith(lower));
  if (prefixed.length === 1) return prefixed[0] as string;
  const limit = Math.max(1, Math.min(2, Math.floor(lower.length / 3)));
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const word of known) {
    const distance = editDistance(lower, word);
    if (distance < bestDistance) {
      best = word;
      bestDistance = distance;
    }
  }
  return bestDistance <= limit ? best : null;
}
