/**
 * Reads the command's stderr log as a program does: every line through the `logfmt` parser from
 * the npm registry (not our own renderer, so a test cannot agree with a bug in it). logLines gives
 * the records; logText renders them back into the words a person reads on a terminal, so that a
 * test about what a message says checks the same words whatever the escaping of the pipe form.
 */
// The parser has no type declarations: this is the part of it the tests use.
const logfmtParser = require('logfmt') as { parse(line: string): Record<string, string | boolean | null> };

/** One parsed log line: its pairs, and the journald priority when the line had a `<N>` prefix. */
export interface LogRecord {
  priority: number | null;
  pairs: Record<string, string>;
  /** The line as written. */
  line: string;
}

/** A diagnostic the simulated NVML library itself writes to the same stderr: not gpugate's log. */
const SIMULATOR_LINE = /^gpugate-sim: /;

/**
 * Every non-empty stderr line of gpugate's log parsed (the simulator library's own lines left
 * out). Throws, naming the line, when one is not logfmt through and through: a bare key, or
 * neither `event=` nor `msg=`.
 */
export function logLines(stderr: string): LogRecord[] {
  return stderr.split('\n').filter((line) => line !== '' && !SIMULATOR_LINE.test(line)).map((line) => {
    const prefix = /^<([0-7])>/.exec(line);
    const body = prefix === null ? line : line.slice(prefix[0].length);
    const parsed = logfmtParser.parse(body);
    const pairs: Record<string, string> = {};
    for (const [key, value] of Object.entries(parsed)) {
      // The parser reads `k=true` and a bare key `k` alike as true, and `k=` as null: tell them apart by the text.
      const written = typeof value === 'boolean' && new RegExp(`(^| )${key}=${String(value)}( |$)`).test(body);
      if (typeof value !== 'string' && !written) throw new Error(`not logfmt: bare key or empty value '${key}' in the log line ${JSON.stringify(line)}`);
      pairs[key] = String(value);
    }
    if (pairs.event === undefined && pairs.msg === undefined) throw new Error(`not logfmt: neither event= nor msg= in the log line ${JSON.stringify(line)}`);
    return { priority: prefix === null ? null : Number(prefix[1]), pairs, line };
  });
}

/** A value as the log's own logfmt writes it (quoted when it holds a space, `"`, `=` or `\`). */
function quoted(value: string): string {
  if (value === '') return '""';
  return /[\s"=\\]/.test(value) ? `"${value.replace(/["\\]/g, (c) => `\\${c}`)}"` : value;
}

/**
 * The log as a person reads it: one line per record, `gpugate: ` and then the message, the
 * failure's reason with its exit code, or the event's name and pairs. The `<N>` priority prefix
 * is kept, as it was written.
 */
export function logText(stderr: string): string {
  return logLines(stderr).map(({ priority, pairs }) => {
    const { event, msg, ...rest } = pairs;
    let text: string;
    if (event === undefined) text = msg ?? '';
    else if (event === 'failed' && rest.reason !== undefined) text = `${rest.reason} (exit ${rest.exit ?? '?'}/${rest.exit_name ?? '?'})`;
    else text = [event, ...Object.entries(rest).map(([key, value]) => `${key}=${quoted(value)}`)].join(' ');
    const named = /^gpugate(?: [a-z-]+)?: /.test(text) ? text : `gpugate: ${text}`;
    return `${priority === null ? '' : `<${priority}>`}${named}\n`;
  }).join('');
}
