/**
 * The table of the `gpugate` command's sub-commands and flags: one entry per flag, naming the
 * commands that accept it. Argument parsing and `--help` are both generated from this table,
 * so a flag cannot be parsed without being documented (or the reverse).
 */
import { gateDefaults } from '../gate/gate-defaults';
import { ENGINE_NAMES } from '../gate/engine-view';
import { formatBytes, formatDuration } from '../units';

/** The sub-commands of `gpugate`. */
export type CommandName = 'wait' | 'check' | 'select' | 'status' | 'holders' | 'doctor' | 'demo' | 'sim' | 'bench' | 'systemd' | 'completion';

/** Every sub-command, in the order `gpugate --help` lists them. */
export const COMMAND_NAMES: readonly CommandName[] = ['wait', 'check', 'select', 'status', 'holders', 'doctor', 'demo', 'sim', 'bench', 'systemd', 'completion'];

/** One line per command, for `gpugate --help` and shell completion. */
export const COMMAND_SUMMARIES: Readonly<Record<CommandName, string>> = {
  wait: 'poll until the GPUs are free and stable, or time out (systemd ExecStartPre=)',
  check: 'one sample: exit 0 if free now, 75 if not (Slurm prolog, health checks)',
  select: 'choose N free GPUs, nearest on the PCI tree, lease them, print CUDA_VISIBLE_DEVICES=…',
  status: 'devices, memory, processes, modes, library and driver versions',
  holders: 'who holds each GPU, classified; leaked /dev/shm files',
  doctor: 'read-only health checks: driver, each GPU, kernel Xid messages, the host (exit 0 / 75 / 69)',
  demo: 'the restart race on the bundled simulated 8-GPU host (no GPU needed)',
  sim: 'run a simulated GPU host for your own NVML tools until interrupted; prints what to export',
  bench: "this host's poll latency: gpugate against nvidia-smi (read-only, bounded in time)",
  systemd: 'print (or --write) the drop-in that puts gpugate in front of an existing unit',
  completion: 'print the shell completion script for bash or zsh',
};

/** Words a command takes besides its flags (`gpugate completion bash`): the value's name and its choices. */
export const COMMAND_ARGUMENTS: Readonly<Partial<Record<CommandName, { name: string; choices: readonly string[] }>>> = {
  completion: { name: 'SHELL', choices: ['bash', 'zsh'] },
};

/** One flag of the command line. */
export interface OptionSpec {
  /** Long name without the dashes. */
  name: string;
  /** One-letter alias. */
  short?: string;
  type: 'string' | 'boolean';
  /** May be given several times (values accumulate). */
  multiple?: boolean;
  /** Placeholder shown in `--help` for the value. */
  valueName?: string;
  /** The placeholder for commands whose values differ (select's --format takes env|json|list). */
  valueNames?: Partial<Record<CommandName, string>>;
  /** One line of help. */
  help: string;
  /** The default, as `--help` shows it (per command when it differs). */
  defaults?: Partial<Record<CommandName, string>>;
  commands: readonly CommandName[];
}

/** The same default for each of `commands`. */
function everyCommand(commands: readonly CommandName[], value: string): Partial<Record<CommandName, string>> {
  return Object.fromEntries(commands.map((command) => [command, value]));
}

const GPU_COMMANDS: readonly CommandName[] = ['wait', 'check', 'select', 'status', 'holders'];
const CRITERIA_COMMANDS: readonly CommandName[] = ['wait', 'check'];
/** Commands that judge GPUs by the criteria flags (select takes them, not the stale actions). */
const JUDGING_COMMANDS: readonly CommandName[] = [...CRITERIA_COMMANDS, 'select'];
/** Commands that poll with stability: wait, and select with --wait. */
const POLLING_COMMANDS: readonly CommandName[] = ['wait', 'select'];

/** Every flag, in the order `--help` lists them. */
export const OPTION_TABLE: readonly OptionSpec[] = [
  // Selection and the NVML library
  { name: 'gpus', type: 'string', valueName: 'LIST', commands: GPU_COMMANDS,
    help: 'GPUs to check: NVML indices, GPU-/MIG- UUIDs (unique prefixes) or PCI bus ids, comma separated. Default: NVIDIA_VISIBLE_DEVICES, then CUDA_VISIBLE_DEVICES, then SLURM_JOB_GPUS, then all' },
  { name: 'allow-empty', type: 'boolean', commands: CRITERIA_COMMANDS,
    help: 'succeed when the selection holds no GPU (CUDA_VISIBLE_DEVICES=-1 or empty, NVIDIA_VISIBLE_DEVICES=none|void, --gpus ""); without it that exits 78' },
  { name: 'library', type: 'string', valueName: 'PATH', commands: [...GPU_COMMANDS, 'doctor', 'bench'],
    help: 'NVML library to load (default: GPUGATE_NVML_LIBRARY, then libnvidia-ml.so.1 in the usual places)' },
  { name: 'nvml-timeout', type: 'string', valueName: 'DUR', commands: [...GPU_COMMANDS, 'doctor', 'bench'], defaults: everyCommand([...GPU_COMMANDS, 'doctor', 'bench'], formatDuration(gateDefaults.callTimeoutMs)),
    help: 'deadline for each NVML call; a hung call ends the command with exit 69' },
  // Criteria
  { name: 'min-free', type: 'string', valueName: 'FRACTION|SIZE', commands: JUDGING_COMMANDS,
    help: 'free memory each GPU needs: a fraction of total below 1 (0.9 mirrors vLLM --gpu-memory-utilization 0.9), a percentage (90%) or a size with a unit (80GiB)' },
  { name: 'for', type: 'string', valueName: ENGINE_NAMES.join('|'), commands: JUDGING_COMMANDS,
    help: "judge --min-free FRACTION as the engine's own start check does: vllm sees NVML total minus reserved as total, and free minus its CUDA context (estimated per GPU model), and needs free >= FRACTION × total" },
  { name: 'margin', type: 'string', valueName: 'SIZE', commands: JUDGING_COMMANDS,
    help: 'extra free memory required on top of --min-free (a size with a unit, e.g. 2GiB)' },
  { name: 'max-used', type: 'string', valueName: 'SIZE|PERCENT', commands: JUDGING_COMMANDS,
    help: 'most memory that may be in use: a size with a unit (1GiB) or a percentage of total (5%); default 1GiB when no criterion is given' },
  { name: 'no-processes', type: 'boolean', commands: JUDGING_COMMANDS,
    help: 'require that no process holds the GPU (ignored processes excepted)' },
  { name: 'ignore', type: 'string', multiple: true, valueName: 'PID|COMM', commands: JUDGING_COMMANDS,
    help: 'holder to ignore (repeatable; COMM matches /proc/PID/comm as given); gpugate itself, and nvidia-persistenced, nv-hostengine and dcgm-exporter when run by root from an executable of that name, are always ignored' },
  // Stability and time
  { name: 'stable', type: 'string', valueName: 'DUR', commands: POLLING_COMMANDS, defaults: { wait: formatDuration(gateDefaults.stableMs), select: `${formatDuration(gateDefaults.stableMs)} (with --wait)` },
    help: 'memory must stay within --stable-tolerance this long while it can still come back (a dying holder, memory off the process list)' },
  { name: 'stable-tolerance', type: 'string', valueName: 'SIZE', commands: POLLING_COMMANDS, defaults: { wait: formatBytes(gateDefaults.stableToleranceBytes), select: formatBytes(gateDefaults.stableToleranceBytes) },
    help: 'how much used memory may move and still count as stable' },
  { name: 'timeout', type: 'string', valueName: 'DUR', commands: POLLING_COMMANDS, defaults: { wait: formatDuration(gateDefaults.timeoutMs), select: `${formatDuration(gateDefaults.timeoutMs)} (with --wait)` },
    help: 'give up (exit 75) after this long; keep it below systemd TimeoutStartSec=' },
  { name: 'interval', type: 'string', valueName: 'DUR', commands: POLLING_COMMANDS, defaults: { wait: formatDuration(gateDefaults.intervalMs), select: formatDuration(gateDefaults.intervalMs) },
    help: 'time between polls' },
  // Choosing and leasing GPUs (select)
  { name: 'count', short: 'n', type: 'string', valueName: 'N', commands: ['select'],
    help: 'how many GPUs to choose (required)' },
  { name: 'wait', type: 'boolean', commands: ['select'],
    help: 'poll (with --stable, like gpugate wait) until N GPUs are eligible, or --timeout (exit 75); without it one sample decides, like gpugate check' },
  { name: 'lease', type: 'string', valueName: 'DUR', commands: ['select'],
    help: 'the lease ends this long after it is taken, measured on the boot clock; without --lease-pid, only then (default: when its holder exits)' },
  { name: 'lease-pid', type: 'string', valueName: 'PID|none', commands: ['select'], defaults: { select: "gpugate's parent (the shell that ran it); none with --lease" },
    help: 'the process the GPUs are for: the lease ends when it exits; none: only --lease DUR bounds it' },
  { name: 'no-lease', type: 'boolean', commands: ['select'],
    help: "choose without leasing (what would be chosen now: others' leases still count; another selector may take the same GPUs)" },
  // Stale handling
  { name: 'stale', type: 'string', valueName: 'report|fail|ignore', commands: CRITERIA_COMMANDS, defaults: { wait: 'report', check: 'report' },
    help: 'what to do with stale holders (leftovers, orphaned workers, zombies) and leaked /dev/shm files: log them, fail at once (exit 75), or skip the /proc scan' },
  { name: 'kill-stale', type: 'boolean', commands: CRITERIA_COMMANDS,
    help: "signal processes proven to be leftovers of an earlier activation of this service, each held by a pidfd (SIGTERM, then SIGKILL after --kill-grace); never PID 1, gpugate's ancestors, a task in state D, or a process in doubt" },
  { name: 'kill-grace', type: 'string', valueName: 'DUR', commands: CRITERIA_COMMANDS, defaults: { wait: formatDuration(gateDefaults.killGraceMs), check: formatDuration(gateDefaults.killGraceMs) },
    help: 'time between SIGTERM and SIGKILL for --kill-stale' },
  { name: 'clean-shm', type: 'string', multiple: true, valueName: 'GLOB', commands: CRITERIA_COMMANDS,
    help: 'remove /dev/shm files matching GLOB that no live process has open or mapped (repeatable)' },
  { name: 'dry-run', type: 'boolean', commands: CRITERIA_COMMANDS,
    help: 'with --kill-stale / --clean-shm: show what would be signalled or removed, do nothing' },
  // Output
  { name: 'json', type: 'boolean', commands: [...GPU_COMMANDS, 'doctor', 'bench', 'systemd'],
    help: 'print one JSON object on stdout at the end' },
  { name: 'format', type: 'string', valueName: 'text|json|prometheus', valueNames: { select: 'env|json|list' }, commands: ['status', 'holders', 'select'], defaults: { status: 'text', holders: 'text', select: 'env' },
    help: 'output format: prometheus (status, holders) writes the node_exporter textfile format; env (select) prints CUDA_VISIBLE_DEVICES=<GPU UUIDs>, list one UUID per line' },
  { name: 'output', type: 'string', valueName: 'PATH', commands: ['status', 'holders'],
    help: 'with --format prometheus: replace PATH atomically (also when NVML fails: gpugate_up 0); a lost GPU keeps the UUID PATH recorded for it' },
  { name: 'notify', type: 'boolean', commands: CRITERIA_COMMANDS,
    help: 'send STATUS= progress to systemd ($NOTIFY_SOCKET; needs NotifyAccess=exec or all)' },
  { name: 'report-file', type: 'string', valueName: 'PATH', commands: CRITERIA_COMMANDS,
    help: 'write the final one-line reason to PATH (e.g. /dev/termination-log)' },
  { name: 'quiet', short: 'q', type: 'boolean', commands: GPU_COMMANDS,
    help: 'log only failures' },
  { name: 'verbose', short: 'v', type: 'boolean', commands: GPU_COMMANDS,
    help: 'log every poll' },
  { name: 'iterations', type: 'string', valueName: 'N', commands: ['bench'], defaults: { bench: '200' },
    help: 'snapshots per measure, and nvidia-smi runs when nvidia-smi is on PATH' },
  { name: 'duration', type: 'string', valueName: 'DUR', commands: ['bench'], defaults: { bench: '20s' },
    help: 'upper bound on the whole benchmark; measures stop early when it is reached' },
  // doctor
  { name: 'kernel-log', type: 'string', valueName: 'PATH', commands: ['doctor'], defaults: { doctor: '/dev/kmsg, then journalctl -k -b' },
    help: 'read the kernel log from PATH (a saved dmesg or journalctl -k output) for NVRM Xid messages' },
  // The simulated host
  { name: 'scenario', type: 'string', valueName: 'FILE', commands: ['sim'], defaults: { sim: 'the bundled scenarios/restart-race.json' },
    help: 'simulator scenario to run (docs/scenarios.md)' },
  { name: 'started-at', type: 'string', valueName: 'WHEN', commands: ['sim'], defaults: { sim: 'now' },
    help: "the timeline's 0 ms: Unix milliseconds, an ISO 8601 UTC time, or now" },
  // A systemd unit
  { name: 'unit', type: 'string', valueName: 'NAME', commands: ['doctor', 'systemd'],
    help: 'the systemd unit the gate protects, e.g. vllm.service (".service" is added when no type is given); doctor checks its restart limits, gate, timeouts, NotifyAccess=, KillMode= and memory fraction' },
  { name: 'unit-path', type: 'string', valueName: 'DIR', commands: ['doctor', 'systemd'],
    help: 'read the unit from its files in DIR (laid out like /etc/systemd/system: NAME, NAME.d/*.conf) instead of systemctl show; default: GPUGATE_SYSTEMD_UNIT_PATH' },
  { name: 'write', type: 'boolean', commands: ['systemd'],
    help: 'put the drop-in in /etc/systemd/system/NAME.d/gpugate.conf (atomically; only replacing a file gpugate wrote)' },
  { name: 'root', type: 'string', valueName: 'DIR', commands: ['systemd'], defaults: { systemd: '/' },
    help: 'with --write: write below DIR instead of / (an image or a test root)' },
  { name: 'help', short: 'h', type: 'boolean', commands: [...GPU_COMMANDS, 'doctor', 'demo', 'sim', 'bench', 'systemd', 'completion'],
    help: 'show this help' },
];

/** A flag's value placeholder as `command` takes it (its choices, when it lists them). */
export function valueNameFor(spec: OptionSpec, command: CommandName): string | undefined {
  return spec.valueNames?.[command] ?? spec.valueName;
}

/** The flags one command accepts. */
export function optionsFor(command: CommandName): OptionSpec[] {
  return OPTION_TABLE.filter((spec) => spec.commands.includes(command));
}
