import { describe, expect, it } from 'vitest';
import { textTable } from '../../src/cli/text-table';

describe('textTable', () => {
  it('pads columns to their widest cell, two spaces apart, with no trailing blanks', () => {
    expect(textTable([['NAME', 'WHY'], ['a', 'long reason'], ['bbbb', 'x']])).toBe('NAME  WHY\na     long reason\nbbbb  x');
  });

  it('aligns the columns named in alignRight to the right, the last one too', () => {
    const rows = [['measure', 'samples', 'median'], ['snapshot', '1000', '12 µs'], ['  per device', '8000', '1.5 µs']];
    expect(textTable(rows, { alignRight: [1, 2] }).split('\n')).toEqual([
      'measure       samples  median',
      'snapshot         1000   12 µs',
      '  per device     8000  1.5 µs',
    ]);
  });
});
