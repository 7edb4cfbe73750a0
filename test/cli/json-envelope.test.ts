import { describe, expect, it } from 'vitest';
import { commandDocument } from '../../src/cli/json-envelope';
import { SCHEMA_VERSION } from '../../src/cli/json-document';

// Every command's --json document comes from this one builder: the envelope first, in one order.
describe('commandDocument', () => {
  it('opens with schemaVersion, command, result, exitCode, then the command fields, as one line', () => {
    const text = commandDocument({ command: 'status', result: 'unavailable', exitCode: 69 }, { takenAt: 5, problems: [] });
    expect(text.endsWith('\n')).toBe(true);
    expect(text.indexOf('\n')).toBe(text.length - 1);
    const document = JSON.parse(text) as Record<string, unknown>;
    expect(Object.keys(document)).toEqual(['schemaVersion', 'command', 'result', 'exitCode', 'takenAt', 'problems']);
    expect(document).toEqual({ schemaVersion: SCHEMA_VERSION, command: 'status', result: 'unavailable', exitCode: 69, takenAt: 5, problems: [] });
  });

  it('escapes U+2028 and U+2029 in a field, as every document does', () => {
    const text = commandDocument({ command: 'holders', result: 'ok', exitCode: 0 }, { comm: 'a\u2028b\u2029c' });
    expect(text).toContain('a\\u2028b\\u2029c');
    expect((JSON.parse(text) as { comm: string }).comm).toBe('a\u2028b\u2029c');
  });
});
