/**
 * The settings of one systemd unit that decide whether gpugate can protect it (restart policy,
 * start limits, start timeout, notification access, kill mode, the ExecStartPre= and ExecStart=
 * command lines), read from one of two sources:
 *
 * - `systemctl show` (the default): what the running manager has loaded, after every drop-in,
 *   its own defaults (system.conf) and `daemon-reload`s; needs systemd as PID 1.
 * - the unit files themselves (a directory given by --unit-path or GPUGATE_SYSTEMD_UNIT_PATH,
 *   see systemd-unit-files.ts): for a unit not installed yet, a container, or a test; it applies
 *   systemd's built-in defaults.
 *
 * systemctl is run with execFile (never a shell), a deadline and a validated unit name.
 */
import { execFile } from 'node:child_process';
import { ConfigError } from '../config-error';
import { ErrorCode, GpugateError } from '../gpugate-error';
import type { ExecCommand } from './systemd-exec-line';
import type { UnitProperties } from './unit-properties';
import { parseTimeSpanUsec } from './systemd-time-span';
import { readUnitFiles } from './systemd-unit-files';

export type { ExecCommand } from './systemd-exec-line';
export type { UnitProperties } from './unit-properties';

/** Where unit settings are read from. */
export type UnitSource =
  | { kind: 'systemctl'; /** default: `systemctl` on PATH */ systemctl?: string; /** default 10 s */ timeoutMs?: number }
  | { kind: 'unit-files'; /** a unit directory, laid out like /etc/systemd/system */ directory: string };

/** The environment variable naming a unit directory to read instead of asking systemctl. */
export const UNIT_PATH_ENV = 'GPUGATE_SYSTEMD_UNIT_PATH';

/** systemctl could not be asked (not installed, systemd not running, no answer in time). */
export class SystemdUnavailableError extends GpugateError {
  override readonly name = 'SystemdUnavailableError';
  declare readonly code: typeof ErrorCode.systemdUnavailable;

  constructor(message: string, options?: ErrorOptions) {
    super(ErrorCode.systemdUnavailable, message, options);
  }
}

/** The properties `systemctl show` is asked for. */
const SHOW_PROPERTIES = [
  'Id', 'LoadState', 'LoadError', 'FragmentPath', 'DropInPaths', 'Type', 'Restart', 'RestartUSec', 'StartLimitIntervalUSec',
  'StartLimitBurst', 'TimeoutStartUSec', 'NotifyAccess', 'KillMode', 'ExecStartPre', 'ExecStart',
] as const;

/** The source chosen by `--unit-path DIR` or, without it, GPUGATE_SYSTEMD_UNIT_PATH; else systemctl. */
export function unitSourceFrom(unitPath: string | undefined, env: NodeJS.ProcessEnv): UnitSource {
  const directory = unitPath ?? env[UNIT_PATH_ENV];
  return directory !== undefined && directory !== '' ? { kind: 'unit-files', directory } : { kind: 'systemctl' };
}

/** Read `name` (already normalised, see systemd-unit-name.ts) from `source`. */
export async function readUnitProperties(name: string, source: UnitSource): Promise<UnitProperties> {
  if (source.kind === 'unit-files') {
    return readUnitFiles(name, source.directory);
  }
  const text = await runSystemctlShow(name, source.systemctl ?? 'systemctl', source.timeoutMs ?? 10_000);
  return parseSystemctlShow(name, text);
}

function runSystemctlShow(name: string, systemctl: string, timeoutMs: number): Promise<string> {
  const args = ['show', '--no-pager', `--property=${SHOW_PROPERTIES.join(',')}`, '--', name];
  return new Promise((resolve, reject) => {
    execFile(systemctl, args, { timeout: timeoutMs, maxBuffer: 4 * 1024 * 1024, env: { ...process.env, LC_ALL: 'C', SYSTEMD_PAGER: '' } }, (error, stdout, stderr) => {
      if (error === null) {
        resolve(stdout);
        return;
      }
      const e = error as NodeJS.ErrnoException & { killed?: boolean };
      const why = e.code === 'ENOENT' ? `${systemctl} is not installed`
        : e.killed === true ? `no answer within ${timeoutMs / 1000} s`
          : stderr.trim().split('\n')[0] || e.message;
      reject(new SystemdUnavailableError(`cannot read unit ${name} with systemctl show: ${why} (to read unit files instead, give --unit-path DIR)`));
    });
  });
}

/** Turn `systemctl show` output (`Key=Value` lines; Exec settings as `{ path=… ; argv[]=… ; … }` records) into properties. */
export function parseSystemctlShow(name: string, text: string): UnitProperties {
  const values = new Map<string, string[]>();
  for (const line of text.split('\n')) {
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    const key = line.slice(0, eq);
    const list = values.get(key);
    if (list === undefined) values.set(key, [line.slice(eq + 1)]);
    else list.push(line.slice(eq + 1));
  }
  const one = (key: string): string | undefined => values.get(key)?.[0];
  const loadState = one('LoadState');
  if (loadState !== 'loaded') {
    const error = one('LoadError');
    throw new ConfigError('unit', `unit ${name} is not loaded (LoadState=${loadState ?? '?'}${error !== undefined && error !== '' ? `, ${error}` : ''}): check the name with systemctl list-unit-files`);
  }
  const span = (key: string, fallback: number): number => {
    const raw = one(key);
    return raw === undefined ? fallback : parseTimeSpanUsec(raw, 'us') ?? fallback;
  };
  const fragment = one('FragmentPath');
  const dropIns = one('DropInPaths');
  return {
    name: one('Id') ?? name,
    source: 'systemctl',
    fragmentPath: fragment === undefined || fragment === '' ? null : fragment,
    dropInPaths: dropIns === undefined || dropIns === '' ? [] : dropIns.split(' '),
    type: one('Type') ?? 'simple',
    restart: one('Restart') ?? 'no',
    restartUsec: span('RestartUSec', 100_000),
    startLimitIntervalUsec: span('StartLimitIntervalUSec', 10e6),
    startLimitBurst: Number(one('StartLimitBurst') ?? 5),
    // systemctl prints a disabled start timeout as "infinity".
    timeoutStartUsec: span('TimeoutStartUSec', 90e6) || Infinity,
    notifyAccess: one('NotifyAccess') ?? 'none',
    killMode: one('KillMode') ?? 'control-group',
    execStartPre: (values.get('ExecStartPre') ?? []).flatMap(parseShownExec),
    execStart: (values.get('ExecStart') ?? []).flatMap(parseShownExec),
    notes: [],
  };
}

/**
 * One `{ path=/usr/bin/x ; argv[]=/usr/bin/x a b ; ignore_errors=no ; … }` record. systemctl
 * joins argv with blanks, so a word that itself held a blank comes back as two words; flags and
 * their values, which is what gpugate reads, survive that.
 */
function parseShownExec(value: string): ExecCommand[] {
  const path = /\{ path=(.*?) ; argv\[\]=/.exec(value)?.[1];
  const argv = / ; argv\[\]=(.*?) ; (?:ignore_errors|flags)=/.exec(value)?.[1];
  if (path === undefined || argv === undefined) return [];
  const ignore = / ; ignore_errors=(yes|no) ;/.exec(value)?.[1] === 'yes' || / ; flags=[^;]*\bignore-failure\b/.test(value);
  return [{ path, argv: argv === '' ? [] : argv.split(' '), ignoreErrors: ignore }];
}
