/**
 * The check every public function runs on its options object before anything else: an object,
 * no key it does not know (a mistyped key would otherwise be a silent default: `{ timeout: 1000 }`
 * sets no timeout), and each known key's value of the type it takes. Each function declares its
 * keys once, as an {@link OptionTable}; the compiler holds the table to the options' interface.
 */
import { ConfigError } from './config-error';
import { nearestWord } from './nearest-word';

/** Checks one option's value: null when it fits, else the complaint (a ConfigError's message). */
export type OptionCheck = (value: unknown, name: string) => string | null;

/** Every key of `Options`, each with the check of its value. */
export type OptionTable<Options> = { readonly [Key in keyof Required<Options>]: OptionCheck };

/** For a key whose value the function checks itself, where it uses it. */
export const checkedWhereUsed: OptionCheck = () => null;

/** The value as an error shows it: JSON where it has a JSON form (shortened), else its type. */
export function describeValue(value: unknown): string {
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'bigint') return `${value}n`;
  if (value === null || typeof value !== 'object') return typeof value === 'string' ? JSON.stringify(value) : String(value);
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    text = undefined;
  }
  if (text === undefined) return Array.isArray(value) ? 'an array' : 'an object';
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/**
 * Rejects `options` with a ConfigError unless it is an object (`example` showing one) whose keys
 * are all in `table` (the error names the key and the nearest known one) and whose values pass
 * their checks (the error carries the check's complaint and names the key). An undefined value counts as absent. `owner`
 * names the options in the errors: `waitForGpusFree(options)`, `option inspectHolders`.
 */
export function checkOptionKeys<Options>(owner: string, options: unknown, table: OptionTable<Options>, example: string): asserts options is Options {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new ConfigError('options', `${owner}: options must be an object like ${example}, got ${describeValue(options)}`);
  }
  const checks: Readonly<Record<string, OptionCheck>> = table;
  const known = Object.keys(checks);
  for (const key of Object.keys(options)) {
    const check = Object.hasOwn(checks, key) ? checks[key] : undefined;
    if (check === undefined) throw unknownOption(owner, key, known);
    // A value checked where it is used is not read here (it may be a getter with a cost).
    if (check === checkedWhereUsed) continue;
    const value: unknown = (options as Record<string, unknown>)[key];
    if (value === undefined) continue;
    const complaint = check(value, key);
    if (complaint !== null) throw new ConfigError(key, complaint);
  }
}

function unknownOption(owner: string, key: string, known: readonly string[]): ConfigError {
  const lowered = known.map((word) => word.toLowerCase());
  const nearest = nearestWord(key, lowered);
  const suggestion = nearest === null ? '' : `; did you mean ${known[lowered.indexOf(nearest)] ?? nearest}?`;
  return new ConfigError(key, `${owner}: unknown option ${JSON.stringify(key)}${suggestion} (known: ${known.join(', ')})`);
}
