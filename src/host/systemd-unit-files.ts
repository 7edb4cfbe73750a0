/**
 * Reads a unit straight from its files in one unit directory (laid out like
 * /etc/systemd/system), the way systemd 252 loads it: the unit file (or its template for an
 * instance, following an alias symlink), then the `.conf` drop-ins of `NAME.d/`, of an alias's
 * directory, of the template (`vllm@.service.d/`), of the dash prefixes (`foo-.service.d/`) and
 * of the type (`service.d/`), one file per name (the most specific directory wins), applied in
 * file-name order. A later assignment replaces an earlier one; an empty assignment resets a
 * setting (for ExecStartPre=/ExecStart= it empties the list). Only the settings gpugate judges
 * are read; the manager's own defaults are systemd's built-in ones (system.conf is not read).
 */
import { existsSync, lstatSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { ConfigError } from '../config-error';
import { parseExecLine, type ExecCommand } from './systemd-exec-line';
import { parseTimeSpanUsec } from './systemd-time-span';
import { fileTypeName, readUnitFileContent } from './unit-file-read';
import type { UnitProperties } from './unit-properties';
import { unitTemplateName, unitType } from './systemd-unit-name';

const RESTART_VALUES = ['no', 'on-success', 'on-failure', 'on-abnormal', 'on-watchdog', 'on-abort', 'always'];
const TYPE_VALUES = ['simple', 'exec', 'forking', 'oneshot', 'dbus', 'notify', 'notify-reload', 'idle'];
const NOTIFY_VALUES = ['none', 'main', 'exec', 'all'];
const KILL_MODE_VALUES = ['control-group', 'mixed', 'process', 'none'];

/** systemd's built-in defaults (DefaultRestartSec=, DefaultStartLimit…=, DefaultTimeoutStartSec=). */
const DEFAULT_RESTART_USEC = 100_000;
const DEFAULT_START_LIMIT_INTERVAL_USEC = 10e6;
const DEFAULT_START_LIMIT_BURST = 5;
const DEFAULT_TIMEOUT_START_USEC = 90e6;

/** One `Key=Value` line, where it came from. */
interface Assignment {
  section: string;
  key: string;
  value: string;
  where: string;
}

/** Read `name` from `directory`. Throws ConfigError when there is no such unit (or it is masked). */
export function readUnitFiles(name: string, directory: string): UnitProperties {
  if (!existsSync(directory) || !statSync(directory).isDirectory()) {
    throw new ConfigError('unitPath', `unit directory ${directory} does not exist or is not a directory`);
  }
  const template = unitTemplateName(name);
  const candidates = [name, ...(template === null ? [] : [template])];
  const fragmentName = candidates.find((candidate) => existsSync(join(directory, candidate)));
  if (fragmentName === undefined) {
    throw new ConfigError('unit', `no unit file ${candidates.join(' or ')} in ${directory}`);
  }
  const fragmentPath = join(directory, fragmentName);
  // systemd loads a unit only from a regular file or a link; a FIFO, socket or device node named like it is no unit.
  const entry = lstatSync(fragmentPath);
  if (!entry.isFile() && !entry.isSymbolicLink()) {
    throw new ConfigError('unit', `no unit file ${name} in ${directory}: ${fragmentPath} is ${fileTypeName(entry)}, not a regular file, so systemd does not load it`);
  }
  const real = realpathSync(fragmentPath);
  const fragment = readUnitFileContent(fragmentPath);
  if (fragment.kind === 'device') {
    const why = real === '/dev/null' ? '' : ', a character device: systemd reads a link to any character device as masked, as it does /dev/null';
    throw new ConfigError('unit', `unit ${name} is masked (${fragmentPath} → ${real}${why})`);
  }
  if (fragment.kind === 'directory') throw new ConfigError('unit', `${fragmentPath} leads to a directory, not a unit file`);
  // An alias (a symlink to another unit file in the directory) also takes that unit's drop-ins.
  const aliasOf = dirname(real) === realpathSync(directory) && basename(real) !== fragmentName ? basename(real) : null;
  const notes: string[] = [];
  const dropInPaths = dropInsFor(name, aliasOf, directory);
  const specifiers = unitSpecifiers(aliasOf ?? name);
  const texts = [fragment.kind === 'text' ? fragment.text : '', ...dropInPaths.map((file) => dropInText(file, notes))];
  const assignments = [real, ...dropInPaths].flatMap((file, i) => parseUnitFile(texts[i] ?? '', file))
    .map((a) => (a.key.startsWith('Exec') ? { ...a, value: expandSpecifiers(a.value, specifiers) } : a));
  const applied = applyAssignments(aliasOf ?? name, assignments);
  return { ...applied, notes: [...notes, ...applied.notes], fragmentPath: real, dropInPaths };
}

/**
 * A drop-in's text. A dangling link, or a link to /dev/null (or another character device), reads
 * as empty, as systemd reads it; so does a directory named like a drop-in, with a note.
 */
function dropInText(file: string, notes: string[]): string {
  const content = readUnitFileContent(file);
  if (content.kind === 'directory') notes.push(`${file}: a directory, not a drop-in file; systemd lists it but reads no settings from it`);
  return content.kind === 'text' ? content.text : '';
}

/** systemd's unit-name specifiers (%n %N %p %P %i %I %j %J); host ones (%H, %u…) stay as written. */
function unitSpecifiers(name: string): Map<string, string> {
  const dot = name.lastIndexOf('.');
  const stem = name.slice(0, dot);
  const at = stem.indexOf('@');
  const prefix = at === -1 ? stem : stem.slice(0, at);
  const instance = at === -1 ? '' : stem.slice(at + 1);
  const lastDash = prefix.lastIndexOf('-');
  const j = lastDash === -1 ? prefix : prefix.slice(lastDash + 1);
  return new Map([['n', name], ['N', stem], ['p', prefix], ['P', unescapeUnitPart(prefix)], ['i', instance], ['I', unescapeUnitPart(instance)], ['j', j], ['J', unescapeUnitPart(j)], ['%', '%']]);
}

/** systemd-escape reversed: `-` is `/`, `\xNN` a byte. */
function unescapeUnitPart(text: string): string {
  return text.replace(/-/g, '/').replace(/\\x([0-9a-fA-F]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

function expandSpecifiers(value: string, specifiers: ReadonlyMap<string, string>): string {
  return value.replace(/%(.)/g, (whole, letter: string) => specifiers.get(letter) ?? whole);
}

/** The drop-in directories of a unit, most specific first. */
function dropInDirectories(name: string, aliasOf: string | null): string[] {
  const template = unitTemplateName(name);
  const type = unitType(name);
  const stem = (template ?? name).slice(0, (template ?? name).lastIndexOf('.'));
  // foo-bar-baz.service → foo-bar-.service.d, foo-.service.d (only the part before an "@").
  const prefix = stem.includes('@') ? stem.slice(0, stem.indexOf('@')) : stem;
  const dashes: string[] = [];
  for (let i = prefix.lastIndexOf('-', prefix.length - 2); i > 0; i = prefix.lastIndexOf('-', i - 1)) dashes.push(`${prefix.slice(0, i + 1)}.${type}.d`);
  // An alias is loaded as the unit it points to: that name's drop-ins come first.
  return [...(aliasOf === null ? [] : [`${aliasOf}.d`]), `${name}.d`, ...(template === null ? [] : [`${template}.d`]), ...dashes, `${type}.d`];
}

function dropInsFor(name: string, aliasOf: string | null, directory: string): string[] {
  const chosen = new Map<string, string>();
  for (const dir of dropInDirectories(name, aliasOf)) {
    const path = join(directory, dir);
    if (!existsSync(path) || !statSync(path).isDirectory()) continue;
    for (const file of readdirSync(path)) {
      if (!file.endsWith('.conf') || chosen.has(file)) continue;
      // Listed whatever its type, as systemd lists it: a drop-in linked to /dev/null masks the
      // ones of the same name further down (it reads as empty), a directory counts but holds
      // nothing, a FIFO is refused when read.
      chosen.set(file, join(path, file));
    }
  }
  return [...chosen.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, path]) => path);
}

/** The assignments of one file: sections, `Key=Value`, comments (`#`, `;`), backslash continuations. */
export function parseUnitFile(text: string, where: string): Assignment[] {
  const out: Assignment[] = [];
  let section = '';
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i += 1) {
    const first = (lines[i] as string).trim();
    const number = i + 1;
    if (first === '' || first.startsWith('#') || first.startsWith(';')) continue;
    // A trailing backslash continues the line (it becomes a blank); comment lines in between are
    // skipped. The parts are joined once, so a long continuation costs time linear in its length.
    const parts = [first];
    let last = first;
    while (last.endsWith('\\') && i + 1 < lines.length) {
      i += 1;
      const next = (lines[i] as string).trim();
      if (next.startsWith('#') || next.startsWith(';')) continue;
      parts[parts.length - 1] = last.slice(0, -1);
      parts.push(next);
      last = next;
    }
    const line = parts.join(' ');
    if (line.startsWith('[') && line.endsWith(']')) {
      section = line.slice(1, -1);
      continue;
    }
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    out.push({ section, key: line.slice(0, eq).trim(), value: line.slice(eq + 1).trim(), where: `${where}:${number}` });
  }
  return out;
}

function applyAssignments(name: string, assignments: readonly Assignment[]): Omit<UnitProperties, 'fragmentPath' | 'dropInPaths'> {
  let type: string | null = null;
  let restart = 'no';
  let restartUsec = DEFAULT_RESTART_USEC;
  let startLimitIntervalUsec = DEFAULT_START_LIMIT_INTERVAL_USEC;
  let startLimitBurst = DEFAULT_START_LIMIT_BURST;
  let timeoutStartUsec: number | null = null;
  let notifyAccess: string | null = null;
  let watchdog = false;
  let killMode = 'control-group';
  let execStartPre: ExecCommand[] = [];
  let execStart: ExecCommand[] = [];
  const notes: string[] = [];
  const choice = (a: Assignment, allowed: readonly string[], current: string): string => {
    if (allowed.includes(a.value)) return a.value;
    notes.push(`${a.where}: ${a.key}=${a.value} is not one of ${allowed.join(', ')}; systemd ignores it`);
    return current;
  };
  const span = (a: Assignment, fallback: number, current: number): number => {
    if (a.value === '') return fallback;
    const usec = parseTimeSpanUsec(a.value, 's');
    if (usec !== null) return usec;
    notes.push(`${a.where}: ${a.key}=${a.value} is not a time span; systemd ignores it`);
    return current;
  };
  const commands = (a: Assignment, current: ExecCommand[]): ExecCommand[] => {
    if (a.value === '') return [];
    const parsed = parseExecLine(a.value);
    // Appended in place: thousands of lines must not copy the list each time.
    if (parsed !== null) {
      current.push(...parsed);
      return current;
    }
    notes.push(`${a.where}: ${a.key}=${a.value} cannot be split into a command (an unclosed quote?); systemd ignores it`);
    return current;
  };
  for (const a of assignments) {
    const inUnit = a.section === 'Unit';
    const inService = a.section === 'Service';
    if (inUnit && (a.key === 'StartLimitIntervalSec') || inService && a.key === 'StartLimitInterval') {
      startLimitIntervalUsec = span(a, DEFAULT_START_LIMIT_INTERVAL_USEC, startLimitIntervalUsec);
    } else if ((inUnit || inService) && a.key === 'StartLimitBurst') {
      const burst = a.value === '' ? DEFAULT_START_LIMIT_BURST : /^\d+$/.test(a.value) ? Number(a.value) : null;
      if (burst === null) notes.push(`${a.where}: StartLimitBurst=${a.value} is not a whole number; systemd ignores it`);
      else startLimitBurst = burst;
    } else if (!inService) {
      continue;
    } else if (a.key === 'Type') {
      type = choice(a, TYPE_VALUES, type ?? 'simple');
    } else if (a.key === 'Restart') {
      restart = a.value === '' ? 'no' : choice(a, RESTART_VALUES, restart);
    } else if (a.key === 'RestartSec') {
      restartUsec = span(a, DEFAULT_RESTART_USEC, restartUsec);
    } else if (a.key === 'TimeoutStartSec' || a.key === 'TimeoutSec') {
      timeoutStartUsec = span(a, DEFAULT_TIMEOUT_START_USEC, timeoutStartUsec ?? DEFAULT_TIMEOUT_START_USEC);
    } else if (a.key === 'NotifyAccess') {
      notifyAccess = a.value === '' ? null : choice(a, NOTIFY_VALUES, notifyAccess ?? 'none');
    } else if (a.key === 'WatchdogSec') {
      watchdog = (parseTimeSpanUsec(a.value, 's') ?? 0) > 0;
    } else if (a.key === 'KillMode') {
      killMode = a.value === '' ? 'control-group' : choice(a, KILL_MODE_VALUES, killMode);
    } else if (a.key === 'ExecStartPre') {
      execStartPre = commands(a, execStartPre);
    } else if (a.key === 'ExecStart') {
      execStart = commands(a, execStart);
    }
  }
  const effectiveType = type ?? (execStart.length === 0 ? 'oneshot' : 'simple');
  // A oneshot unit has no start timeout unless one is set; 0 also means none.
  const timeout = timeoutStartUsec ?? (effectiveType === 'oneshot' ? Infinity : DEFAULT_TIMEOUT_START_USEC);
  const notifyByType = effectiveType === 'notify' || effectiveType === 'notify-reload' || watchdog ? 'main' : 'none';
  return {
    name,
    source: 'unit-files',
    type: effectiveType,
    restart,
    restartUsec,
    startLimitIntervalUsec,
    startLimitBurst,
    timeoutStartUsec: timeout === 0 ? Infinity : timeout,
    notifyAccess: notifyAccess ?? notifyByType,
    killMode,
    execStartPre,
    execStart,
    notes,
  };
}
