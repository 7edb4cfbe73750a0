/**
 * The command lines of `ExecStart=`-style settings as systemd splits them in a unit file: words
 * separated by blanks, "double" and 'single' quotes grouping, C escapes, the prefixes `-@:+!`
 * on the first word, and a lone `;` starting the next command. Specifiers (`%i`) and variables
 * (`$VAR`) are left as written: they are expanded only when the unit runs.
 */

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
