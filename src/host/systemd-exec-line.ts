/**
 * The command lines of `ExecStart=`-style settings as systemd splits them in a unit file: words
 * separated by blanks, "double" and 'single' quotes grouping, C escapes, the prefixes `-@:+!`
 * on the first word, and a lone `;` starting the next command. Specifiers (`%i`) and variables
 * (`$VAR`) are left as written: they are expanded only when the unit runs. The other way, one
 * place writes a command so that systemd reads it back word for word (formatExecCommand), and
 * decides how node is started from a unit.
 */
import { ConfigError } from '../config-error';

/** One command of an Exec setting. */
export interface ExecCommand {
  /** The program (the first word, prefixes removed). */
  path: string;
  /** Its arguments, argv[0] first. */
  argv: string[];
  /** The `-` prefix: a failure does not fail the unit. */
  ignoreErrors: boolean;
}

const C_ESCAPES: Readonly<Record<string, string>> = { a: '\x07', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '\\': '\\', '"': '"', "'": "'", s: ' ', ';': ';' };

/** Split one setting's value into words; null when a quote is left open. */
export function splitExecWords(value: string): string[] | null {
  const words: string[] = [];
  let word: string | null = null;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < value.length; i += 1) {
    const char = value[i] as string;
    if (quote === null && /\s/.test(char)) {
      if (word !== null) words.push(word);
      word = null;
      continue;
    }
    word ??= '';
    if (char === '\\' && i + 1 < value.length) {
      const next = value[i + 1] as string;
      const escaped = C_ESCAPES[next];
      if (escaped !== undefined) {
        word += escaped;
        i += 1;
      } else if (next === 'x' && /^[0-9a-fA-F]{2}$/.test(value.slice(i + 2, i + 4))) {
        word += String.fromCharCode(parseInt(value.slice(i + 2, i + 4), 16));
        i += 3;
      } else {
        // systemd keeps an escape it does not know as written, in the same word.
        word += char + next;
        i += 1;
      }
      continue;
    }
    if (quote !== null && char === quote) {
      quote = null;
      continue;
    }
    if (quote === null && (char === '"' || char === "'")) {
      quote = char;
      continue;
    }
    word += char;
  }
  if (quote !== null) return null;
  if (word !== null) words.push(word);
  return words;
}

/** The commands of one `ExecStartPre=` (or similar) value; null when it cannot be split. */
export function parseExecLine(value: string): ExecCommand[] | null {
  const words = splitExecWords(value);
  if (words === null) return null;
  const commands: ExecCommand[] = [];
  let current: string[] = [];
  const flush = (): boolean => {
    if (current.length === 0) return true;
    const first = current[0] as string;
    const prefix = /^[-@:+!]*/.exec(first)?.[0] ?? '';
    const path = first.slice(prefix.length);
    if (path === '') return false;
    // "@" means the next word is argv[0] instead of the program's own name.
    const argv = prefix.includes('@') ? current.slice(1) : [path, ...current.slice(1)];
    commands.push({ path, argv, ignoreErrors: prefix.includes('-') });
    current = [];
    return true;
  };
  for (const word of words) {
    if (word === ';') {
      if (!flush()) return null;
    } else {
      current.push(word);
    }
  }
  if (!flush()) return null;
  return commands;
}

/** Characters that need no quoting in an Exec word. */
const PLAIN_WORD_RE = /^[A-Za-z0-9_@+=:,./-]+$/;

/** Characters a unit file line cannot carry (a newline would end the setting). */
const CONTROL_RE = /[\x00-\x1f\x7f]/;

/**
 * Write `argv` as one command of an `ExecStartPre=` (or similar) value, so that systemd passes
 * every word through unchanged: `%` doubled everywhere (specifiers are expanded in the whole
 * line), `$` doubled in the arguments (variables are expanded there, never in the program path,
 * which systemd takes as written), and a word with anything but plain characters in double
 * quotes, `\` and `"` escaped. Throws a ConfigError naming the word for a control character,
 * which no unit file line can carry, for a program path with a quote or a backslash, which
 * systemd refuses to run (its string_is_safe()), or for a relative program path.
 */
export function formatExecCommand(argv: readonly string[]): string {
  return argv.map((word, i) => {
    if (CONTROL_RE.test(word)) {
      throw new ConfigError('execLine', `${JSON.stringify(word)} holds a control character (a newline, a tab…): a systemd unit line cannot carry it; move the file to a path without one`);
    }
    if (i === 0 && /["'\\]/.test(word)) {
      throw new ConfigError('execLine', `${JSON.stringify(word)}: systemd refuses a program path holding a quote or a backslash ("Executable name contains special characters"), however it is quoted; install it under a path without one`);
    }
    if (i === 0 && !word.startsWith('/') && word.includes('/')) {
      throw new ConfigError('execLine', `${JSON.stringify(word)}: the program of an Exec line must be an absolute path or a bare name systemd looks up`);
    }
    const escaped = word.replace(/%/g, '%%');
    const expanded = i === 0 ? escaped : escaped.replace(/\$/g, '$$$$');
    return PLAIN_WORD_RE.test(expanded) ? expanded : `"${expanded.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
  }).join(' ');
}

/** Node's flag (Node ≥ 22.14) that stops SIGUSR1 from opening its inspector: a root process must never listen on a port, not even before gpugate's own handler is installed. */
export const NODE_NO_INSPECTOR_SIGNAL = '--disable-sigusr1';

/** Whether `program` is a Node.js binary (`node`, `nodejs`, `node22`, by any path). */
export function isNodeProgram(program: string): boolean {
  return /^(?:node|nodejs)\d*$/.test(program.slice(program.lastIndexOf('/') + 1));
}

/** The words that run `script` with `node` from a unit: node, the inspector-signal guard, the script. */
export function nodeScriptArgv(node: string, script: string): string[] {
  return [node, NODE_NO_INSPECTOR_SIGNAL, script];
}

/** Whether the words before a script (`node [flags]`, perhaps behind `env` or `nice`) run node without NODE_NO_INSPECTOR_SIGNAL. */
export function nodeLacksSignalGuard(wordsBeforeScript: readonly string[]): boolean {
  const at = wordsBeforeScript.findIndex(isNodeProgram);
  return at !== -1 && !wordsBeforeScript.slice(at + 1).includes(NODE_NO_INSPECTOR_SIGNAL);
}
