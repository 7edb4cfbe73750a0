/**
 * What a unit's command lines say about gpugate and the service it guards: the `gpugate wait`
 * command (in ExecStartPre=, or wrapping ExecStart= as `gpugate wait … -- CMD`), its settings
 * as `gpugate wait` itself parses them, and the service's own `--gpu-memory-utilization`.
 */
import { basename, join } from 'node:path';
import { parseWaitSettings, type WaitSettings } from './criteria-settings';
import { parseCommandLine } from './parse-command-line';
import type { ExecCommand, UnitProperties } from '../host/systemd-unit';
import { PACKAGE_ROOT } from '../package-root';

/** The gate found in a unit. */
export interface UnitGate {
  /** The setting that runs it. */
  setting: 'ExecStartPre' | 'ExecStart';
  /** The command as systemd runs it. */
  command: ExecCommand;
  /** The words after `wait` (up to a `--`). */
  flags: string[];
  /** Words after `--` (the wrapped service), for the ExecStart= form. */
  wrapped: string[];
  /** The words before gpugate's own (e.g. `/usr/bin/node --disable-sigusr1`); empty when gpugate is the program. */
  launcher: string[];
  /** Whether gpugate is the process systemd starts (or one it execs into), not a child of a launcher such as npx or a shell. */
  direct: boolean;
  /** Its settings, parsed as `gpugate wait` parses them; null when they do not parse. */
  settings: WaitSettings | null;
  /** Why the settings do not parse. */
  error: string | null;
}

/** Programs that exec the next word (same process) rather than starting it as a child. */
const EXEC_WRAPPERS = new Set(['env', 'node', 'nodejs', 'nice', 'ionice', 'chrt', 'taskset', 'numactl']);

/** Where the gpugate word is in argv: `gpugate`, `…/gpugate`, or a path to gpugate's dist/cli/main.js. */
function gpugateIndex(argv: readonly string[]): number {
  const ownMain = join(PACKAGE_ROOT, 'dist', 'cli', 'main.js');
  return argv.findIndex((word, i) => argv[i + 1] === 'wait' && (basename(word) === 'gpugate' || word === ownMain || /(^|\/)gpugate\/dist\/cli\/main\.js$/.test(word)));
}

function gateIn(setting: UnitGate['setting'], command: ExecCommand): UnitGate | null {
  const at = gpugateIndex(command.argv);
  if (at === -1) return null;
  const rest = command.argv.slice(at + 2);
  const separator = rest.indexOf('--');
  const flags = separator === -1 ? rest : rest.slice(0, separator);
  const wrapped = separator === -1 ? [] : rest.slice(separator + 1);
  const launcher = command.argv.slice(0, at);
  const direct = launcher.every((word) => EXEC_WRAPPERS.has(basename(word)) || /^-|=/.test(word));
  let settings: WaitSettings | null = null;
  let error: string | null = null;
  try {
    const parsed = parseCommandLine(['wait', ...flags]);
    if (parsed.kind !== 'command') throw new Error('not a wait command line');
    settings = parseWaitSettings(parsed.values);
  } catch (caught) {
    error = caught instanceof Error ? caught.message : String(caught);
  }
  return { setting, command, flags, wrapped, launcher, direct, settings, error };
}

/** The gate of `unit`: the first `gpugate wait` of ExecStartPre=, else one wrapping ExecStart=; null when there is none. */
export function findUnitGate(unit: UnitProperties): UnitGate | null {
  for (const command of unit.execStartPre) {
    const gate = gateIn('ExecStartPre', command);
    if (gate !== null) return gate;
  }
  for (const command of unit.execStart) {
    const gate = gateIn('ExecStart', command);
    if (gate !== null) return gate;
  }
  return null;
}

/** The service's `--gpu-memory-utilization`, as written (a number, or a `$VAR` gpugate cannot resolve). */
export interface MemoryUtilization {
  /** The text after the flag. */
  text: string;
  /** The fraction, or null when the text is not a number in (0, 1]. */
  fraction: number | null;
  /** The ExecStart= command it was found in. */
  argv: string[];
}

const UTILIZATION_FLAG = '--gpu-memory-utilization';

/** The first `--gpu-memory-utilization X` (or `=X`) in ExecStart=, or null. */
export function findMemoryUtilization(unit: UnitProperties): MemoryUtilization | null {
  for (const command of unit.execStart) {
    const { argv } = command;
    for (let i = 0; i < argv.length; i += 1) {
      const word = argv[i] as string;
      const text = word === UTILIZATION_FLAG ? argv[i + 1] : word.startsWith(`${UTILIZATION_FLAG}=`) ? word.slice(UTILIZATION_FLAG.length + 1) : undefined;
      if (text === undefined) continue;
      const value = /^(?:\d+(?:\.\d*)?|\.\d+)$/.test(text) ? Number(text) : NaN;
      return { text, fraction: value > 0 && value <= 1 ? value : null, argv };
    }
  }
  return null;
}
