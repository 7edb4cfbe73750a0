/**
 * Names of systemd units as gpugate accepts them on its command line: checked before they reach
 * `systemctl` or a path, so a name can never be an option, a path or a glob.
 */
import { UsageError } from '../usage-error';

/** Unit types systemd knows; a name without one of these suffixes gets `.service`. */
const UNIT_SUFFIXES = ['service', 'socket', 'device', 'mount', 'automount', 'swap', 'target', 'path', 'timer', 'slice', 'scope'] as const;

/** Characters systemd allows in a unit name (unit_name_is_valid: letters, digits, ":-_.\\" and one "@"). */
const UNIT_NAME_RE = /^[A-Za-z0-9:_.\\@-]+$/;

/** systemd's limit on a unit name's length (UNIT_NAME_MAX). */
const UNIT_NAME_MAX = 255;

const EXPECTED = 'a unit name such as vllm.service or vllm@llama.service (letters, digits and ":_.\\@-"; ".service" is added when no unit type is given)';

/**
 * The full unit name for `text`: `vllm` becomes `vllm.service`, `vllm@a.service` stays. Throws
 * UsageError for anything systemd would not accept as a unit name (and for templates without an
 * instance, which cannot be started).
 */
export function normaliseUnitName(text: string): string {
  if (text === '' || text.length > UNIT_NAME_MAX || !UNIT_NAME_RE.test(text) || text.startsWith('-') || text.startsWith('.')) {
    throw new UsageError(text, EXPECTED);
  }
  const suffix = /\.([a-z]+)$/.exec(text)?.[1];
  const name = suffix !== undefined && (UNIT_SUFFIXES as readonly string[]).includes(suffix) ? text : `${text}.service`;
  const stem = name.slice(0, name.lastIndexOf('.'));
  const at = stem.indexOf('@');
  if (at !== -1 && (stem.indexOf('@', at + 1) !== -1 || at === 0)) throw new UsageError(text, EXPECTED);
  if (at === stem.length - 1) {
    throw new UsageError(text, EXPECTED, `invalid unit name ${JSON.stringify(text)}: a template needs an instance (e.g. ${stem}llama${name.slice(stem.length)})`);
  }
  if (name.length > UNIT_NAME_MAX) throw new UsageError(text, EXPECTED);
  return name;
}

/** The template a unit instance comes from (`vllm@a.service` → `vllm@.service`), or null. */
export function unitTemplateName(name: string): string | null {
  const dot = name.lastIndexOf('.');
  const at = name.indexOf('@');
  if (at === -1 || at > dot) return null;
  return `${name.slice(0, at + 1)}${name.slice(dot)}`;
}

/** The unit's type, its suffix without the dot (`service`). */
export function unitType(name: string): string {
  return name.slice(name.lastIndexOf('.') + 1);
}
