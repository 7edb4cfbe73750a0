/**
 * Text that reaches a terminal or the journal comes partly from others: process names (anyone can
 * set their own comm), GPU names and driver strings. This is the one place that makes such text
 * inert: every character that a terminal would act on instead of show is written as an escape
 * (`\x1b`, `\u{202e}`), so no escape sequence, carriage return or bidirectional override from a
 * process name can rewrite what the operator sees. JSON and Prometheus output escape by their
 * own rules and do not use this.
 */

// C0 controls (tab and newline included), DEL, C1 controls (0x9b is a one-byte CSI), the Unicode
// line and paragraph separators, and the bidirectional marks, embeddings, overrides and isolates.
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

/** `text` with every character a terminal would interpret written as a visible escape. */
export function escapeForTerminal(text: string): string {
  return text.replace(UNSAFE, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`;
  });
}
