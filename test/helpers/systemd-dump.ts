/**
 * systemd's own reading of a unit, offline: `systemd-analyze verify --root=DIR` loads the unit
 * with the real unit loader and, at debug log level, dumps what it loaded (fragment, drop-ins in
 * the order applied, Type, Restart, RestartSec, TimeoutStartSec, NotifyAccess, KillMode, the
 * Exec command lines). Tests compare gpugate's unit-file reader with it.
 */
import { spawnSync } from 'node:child_process';
import { splitExecWords } from '../../src/host/systemd-exec-line';

/** Whether systemd-analyze can be run here. */
export function haveSystemdAnalyze(): boolean {
  const result = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
  return result.error === undefined && result.status === 0;
}

/** What systemd loaded for one unit. */
export interface SystemdDump {
  fragmentPath: string | null;
  dropInPaths: string[];
  fields: Map<string, string>;
  /** Exec setting name → argv of each command. */
  exec: Map<string, string[][]>;
}

/** Load `unit` below `root` (which holds etc/systemd/system/…) with systemd's loader and parse its dump. */
export function systemdDump(root: string, unit: string): SystemdDump {
  const result = spawnSync('systemd-analyze', ['verify', `--root=${root}`, unit], {
    encoding: 'utf8', timeout: 60_000, env: { ...process.env, SYSTEMD_LOG_LEVEL: 'debug', SYSTEMD_LOG_COLOR: '0' },
  });
  // The dump goes to stdout, the log to stderr.
  const lines = result.stdout.split('\n');
  // An alias is dumped under the name of the unit it points to.
  const start = lines.findIndex((line) => line.startsWith("\t-> Unit "));
  if (start === -1) throw new Error(`systemd-analyze printed no dump of ${unit}:\n${result.stderr}`);
  const dump: SystemdDump = { fragmentPath: null, dropInPaths: [], fields: new Map(), exec: new Map() };
  let execName: string | null = null;
  for (const line of lines.slice(start + 1)) {
    const depth = /^\t*/.exec(line)?.[0].length ?? 0;
    if (depth < 2) break;
    const text = line.trim();
    const execHeader = /^-> (Exec\w+):$/.exec(text);
    if (execHeader !== null) {
      execName = execHeader[1] as string;
      dump.exec.set(execName, []);
      continue;
    }
    if (depth === 3 && execName !== null && text.startsWith('Command Line: ')) {
      dump.exec.get(execName)?.push(splitExecWords(text.slice('Command Line: '.length)) ?? []);
      continue;
    }
    if (depth !== 2) continue;
    execName = null;
    const colon = text.indexOf(': ');
    if (colon === -1) continue;
    const key = text.slice(0, colon);
    const value = text.slice(colon + 2);
    if (key === 'Fragment Path') dump.fragmentPath = value;
    else if (key === 'DropIn Path') dump.dropInPaths.push(value);
    else if (!dump.fields.has(key)) dump.fields.set(key, value);
  }
  return dump;
}
