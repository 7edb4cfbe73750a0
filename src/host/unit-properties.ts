/**
 * The settings of one systemd unit that gpugate reads, whichever source they come from
 * (systemd-unit.ts reads `systemctl show`, systemd-unit-files.ts the files): their own file, so
 * the two readers share the shape without importing each other.
 */
import type { ExecCommand } from './systemd-exec-line';

/** What the checks and the drop-in generator need to know about a unit. */
export interface UnitProperties {
  /** The unit's full name, e.g. `vllm.service`. */
  name: string;
  /** Where the values came from. */
  source: 'systemctl' | 'unit-files';
  /** The unit file, or null when systemd reports none. */
  fragmentPath: string | null;
  /** Drop-ins in the order systemd applies them. */
  dropInPaths: string[];
  /** `Type=`: simple, exec, forking, oneshot, dbus, notify… */
  type: string;
  /** `Restart=`: no, on-failure, always… */
  restart: string;
  /** `RestartSec=`. */
  restartUsec: number;
  /** `StartLimitIntervalSec=`; 0 turns the start limit off. */
  startLimitIntervalUsec: number;
  /** `StartLimitBurst=`. */
  startLimitBurst: number;
  /** `TimeoutStartSec=`; Infinity when there is none. */
  timeoutStartUsec: number;
  /** `NotifyAccess=`: none, main, exec or all. */
  notifyAccess: string;
  /** `KillMode=`: control-group, mixed, process or none. */
  killMode: string;
  /** `ExecStartPre=` commands, in order. */
  execStartPre: ExecCommand[];
  /** `ExecStart=` commands. */
  execStart: ExecCommand[];
  /** Lines systemd would ignore or reject, as read from the unit files (empty from systemctl). */
  notes: string[];
}
