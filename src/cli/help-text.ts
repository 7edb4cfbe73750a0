/**
 * `--help` text: the top-level summary and one page per command (usage, what it does, its flags
 * from the option table, examples, exit codes), fitted to the terminal's width (80 when stdout is
 * not one, or `COLUMNS`): lines wrap at spaces, a flag's help and an exit code's meaning with a hanging indent
 * under their column, an example with a shell line continuation so it can still be pasted.
 */

/** Below this many columns beside the flags (or fewer than its longest word), a flag's help goes under it instead. */
const NARROWEST_HELP_COLUMN = 24;
/** Where a flag's help starts when it goes under the flag. */
const HELP_UNDER_FLAG = ' '.repeat(8);

/** The continuation indent of a too-long line: under its text after a label (`  64   `, `  wait        `), else its own. */
function hangingIndent(line: string): string {
  const column = /^ *\S+ {2,}/.exec(line)?.[0] ?? /^ */.exec(line)?.[0] ?? '';
  return ' '.repeat(column.length);
}

/** Every line of `text` wrapped to `width` at spaces, each under its own column. */
function fitted(text: string, width: number): string {
  return text.split('\n').map((line) => wrapLine(line, width, hangingIndent(line))).join('\n');
}

/**
 * An example command fitted to `width`: the command broken at spaces outside quotes with ` \`
 * continuations, so it still pastes as one, then its comment on a line of its own under it.
 */
function fittedExample(example: string, width: number): string {
  if (example.length + 2 <= width) return `  ${example}`;
  const comment = /^(.*?) {2,}(# .*)$/.exec(example);
  const command = comment?.[1] ?? example;
  const lines: string[] = [];
  const words: string[] = [];
  let word = '';
  let quote: string | null = null;
  for (const ch of command) {
    if (quote === null && (ch === '"' || ch === "'")) quote = ch;
    else if (ch === quote) quote = null;
    if (ch === ' ' && quote === null) {
      if (word !== '') words.push(word);
      word = '';
    } else word += ch;
  }
  if (word !== '') words.push(word);
  let line = '  ';
  for (const next of words) {
    const indentOnly = line.trim() === '';
    if (!indentOnly && line.length + 1 + next.length + 2 > width) {
      lines.push(`${line} \\`);
      line = `      ${next}`;
    } else line = indentOnly ? `${line}${next}` : `${line} ${next}`;
  }
  lines.push(line);
  if (comment !== null) lines.push(wrapLine(`      ${comment[2] ?? ''}`, width, '      # '));
  return lines.join('\n');
}

import { HOLDER_CLASSES } from '../gate/holder-classes';
import { DEFAULT_LEASE_DIR, LEASE_DIR_ENV } from '../host/gpu-lease';
import { DEFAULT_SYSFS_ROOT, SYSFS_ROOT_ENV } from '../host/pci-topology';
import { COMMAND_NAMES, COMMAND_SUMMARIES, optionsFor, valueNameFor, type CommandName } from './option-table';
import { wrapLine } from './terminal-style';

/** A command's help page; `exitCodes` replaces the wait/check table for commands that judge nothing. */
interface CommandSummary {
  usage: string[];
  about: string;
  examples: string[];
  exitCodes?: string;
}

/** Exit codes of the commands that only read and report (status, holders, bench). */
const REPORT_EXIT_CODES = `Exit codes:
  0    the report was printed
  64   usage error (unknown flag, bad size or duration)
  69   NVML unavailable: library missing, init failure, driver/library mismatch, GPU lost, NVML call hung, driver already stuck in the kernel (run gpugate doctor)
  70   internal error (a bug: please report it)
  71   OS error: /proc or cgroupfs unreadable where required
  78   impossible configuration: --gpus matches nothing
  129  interrupted by SIGHUP / 130 by SIGINT / 143 by SIGTERM`;

const SUMMARIES: Record<CommandName, CommandSummary> = {
  wait: {
    usage: ['gpugate wait [options]', 'gpugate wait [options] -- CMD [ARGS...]'],
    about: 'Poll until every selected GPU meets the criteria and its memory has been stable for --stable, or time out (exit 75).\nWith "-- CMD", run CMD once the GPUs are free, pass SIGINT/SIGTERM/SIGHUP on to it (once), and exit with its status.',
    examples: [
      'gpugate wait --min-free 0.9 --margin 2GiB --stable 5s --timeout 240s --notify   # systemd ExecStartPre=',
      'gpugate wait --gpus 0,1 --max-used 1GiB --timeout 60s',
      'gpugate wait --min-free 0.9 --json > result.json',
      'gpugate wait --min-free 0.9 --report-file /dev/termination-log -- vllm serve MODEL   # container entrypoint',
    ],
  },
  check: {
    usage: ['gpugate check [options]'],
    about: 'Take one sample and exit 0 when every selected GPU meets the criteria now, 75 when not (no waiting, no stability).',
    examples: [
      'gpugate check --gpus "$SLURM_JOB_GPUS"   # Slurm prolog: non-zero drains the node',
      'gpugate check --max-used 1GiB --no-processes --json',
    ],
  },
  select: {
    usage: ['gpugate select --count N [options]'],
    about: 'Choose N GPUs that meet the criteria (as check judges them; with --wait, polled and stable as wait judges them),\n' +
      'carry no stale holder and are not leased to a live process; prefer GPUs behind one PCIe switch, then one host\n' +
      `bridge, then one NUMA node; lease them (a record under ${DEFAULT_LEASE_DIR}, or $${LEASE_DIR_ENV}, that ends when\n` +
      'the holder process exits, or after --lease DUR on the boot clock; --lease alone binds no holder); print them as\n' +
      'CUDA_VISIBLE_DEVICES=<GPU UUIDs>, which CUDA reads whatever CUDA_DEVICE_ORDER is. Concurrent selectors never hand out\n' +
      'the same GPU, and a lease on a MIG instance also covers its whole GPU (and the reverse).',
    examples: [
      'export "$(gpugate select --count 2 --lease-pid $$)"   # this shell holds the lease until it exits',
      'gpugate select -n 4 --min-free 0.9 --wait --timeout 10m --lease 12h --lease-pid none --format list',
      'gpugate select --count 1 --no-lease --json',
    ],
    exitCodes: `Exit codes:
  0    N GPUs chosen (and leased); the result is on stdout
  64   usage error (unknown flag, no --count, bad size or duration)
  69   NVML unavailable: library missing, init failure, driver/library mismatch, GPU lost, NVML call hung, driver already stuck in the kernel (run gpugate doctor)
  70   internal error (a bug: please report it)
  71   OS error: the lease directory or /proc unreadable
  75   fewer than N GPUs eligible now (without --wait) or until --timeout (with it); or another selector held the lease lock too long
  77   no permission to write the lease directory
  78   impossible configuration: --gpus matches nothing, the selection holds fewer than N GPUs, threshold above total;
       or a lease bound only to a process the host cannot check (gpugate sees a nested PID namespace's /proc: add --lease)
  129  interrupted by SIGHUP / 130 by SIGINT / 143 by SIGTERM`,
  },
  status: {
    usage: ['gpugate status [options]'],
    about: 'Show devices, memory, processes, modes, and the NVML library and driver versions.',
    examples: [
      'gpugate status',
      'gpugate status --json',
      'gpugate status --format prometheus --output /var/lib/node_exporter/textfile/gpugate.prom   # atomic, also on failure',
    ],
    exitCodes: REPORT_EXIT_CODES.replace('GPU lost,', 'a selected GPU lost or with memory figures that do not add up (after the report),'),
  },
  holders: {
    usage: ['gpugate holders [options]'],
    about: `Show who holds each GPU, classified (${HOLDER_CLASSES.join(', ')}),\nmemory no listed process accounts for, and leaked /dev/shm files.`,
    examples: ['gpugate holders', 'gpugate holders --gpus 6 --json', 'gpugate holders --format prometheus --output /var/lib/node_exporter/textfile/gpugate.prom'],
    exitCodes: REPORT_EXIT_CODES,
  },
  doctor: {
    usage: ['gpugate doctor [options]'],
    about: 'Quick, read-only health checks (in the spirit of DCGM\'s level-1 diagnostic), each pass, warn or fail with its evidence\nand what to do: the driver (NVML and kernel module versions, the 535.43-535.86 process-list branch, CUDA version),\nevery GPU (the driver\'s recovery action, persistence, compute and MIG modes, remapped rows, ECC, retired pages,\nclock slowdowns, PCIe link, fabric), the kernel\'s NVRM Xid messages of this boot, and the host (device nodes,\ncontainer, PID namespace, CUDA_VISIBLE_DEVICES ordering, nvidia-persistenced); with --unit, the systemd unit the gate\nprotects (start limits that end a crash loop, the gate in ExecStartPre=, TimeoutStartSec=, NotifyAccess=, KillMode=,\n--gpu-memory-utilization). Changes nothing.',
    examples: [
      'gpugate doctor',
      'gpugate doctor --json > doctor.json',
      'journalctl -k -b > kernel.log && gpugate doctor --kernel-log kernel.log   # without access to /dev/kmsg',
      'gpugate doctor --unit vllm.service   # also judge the unit (read with systemctl show; --unit-path DIR reads its files)',
    ],
    exitCodes: `Exit codes:
  0    every check passed
  64   usage error (unknown flag, bad duration, --unit NAME that is not a unit name)
  69   at least one check failed (NVML unavailable, or a --unit that cannot be read, counts as a failed check)
  70   internal error (a bug: please report it)
  75   warnings only
  129  interrupted by SIGHUP / 130 by SIGINT / 143 by SIGTERM`,
  },
  demo: {
    usage: ['gpugate demo'],
    about: 'Replay a service restart race on the bundled simulated 8x RTX PRO 6000 host (no GPU needed):\nthe previous attempt still holds ~92 GiB per GPU, one holder is a real orphaned engine worker, then memory drains.\nShows "gpugate wait --min-free 0.9 --stable 2s" waiting, explaining why, and succeeding.',
    examples: ['gpugate demo'],
    exitCodes: `Exit codes:
  0    the wait succeeded, as it should
  69   the simulator library is not built
  129  interrupted by SIGHUP / 130 by SIGINT / 143 by SIGTERM, at any moment: its worker is ended, its folder removed`,
  },
  sim: {
    usage: ['gpugate sim [--scenario FILE] [--started-at WHEN]'],
    about: 'Start a simulated GPU host for your own tools (no GPU needed) and keep it running until interrupted:\nthe scenario anchored to one start time (every reader sees the same moment of its timeline), real processes\nfor its "spawn" holders, and the simulator library of its driver profile. Prints the variables to export.',
    examples: [
      'gpugate sim > sim.env &   # then, once sim.env has its lines:  . ./sim.env && nvitop -1',
      'gpugate sim --scenario scenarios/mig.json --started-at 2026-12-01T09:00:00Z > sim.env &',
    ],
    exitCodes: `Exit codes:
  64   usage error: unknown flag, bad --started-at, a scenario that cannot be read or that the simulator rejects
  69   the simulator library for the scenario's driver profile is not built
  129  interrupted by SIGHUP / 130 by SIGINT / 143 by SIGTERM, at any moment: the host is stopped, its processes ended, its folder removed`,
  },
  systemd: {
    usage: ['gpugate systemd --unit NAME [--unit-path DIR] [--write [--root DIR]] [--json]'],
    about: 'Print the drop-in that puts "gpugate wait" in front of an existing unit: the lines of contrib/systemd/gpugate-wait.conf,\nwith --for vllm --min-free from the unit\'s own --gpu-memory-utilization, the installed gpugate by absolute path (else node\n--disable-sigusr1 and main.js, with a warning for a path a service should not depend on, such as a project\'s node_modules),\nstart limits that still end a crash loop with its RestartSec=, and a TimeoutStartSec= above the gate\'s (never shorter\nthan the unit\'s). It never makes the unit worse: --margin shrinks to what an idle GPU of this host (read with NVML)\noffers, NotifyAccess= is only widened, and a start limit the unit switched off stays off (stderr says what was kept).\nThe unit is read with systemctl show, or from its files with --unit-path. --write puts the drop-in in\n/etc/systemd/system/NAME.d/gpugate.conf atomically and never replaces a file gpugate did not write.',
    examples: [
      'gpugate systemd --unit vllm.service                  # print it',
      'sudo gpugate systemd --unit vllm.service --write && sudo systemctl daemon-reload',
      'gpugate systemd --unit vllm@llama.service --unit-path ./units   # from unit files not installed yet',
    ],
    exitCodes: `Exit codes:
  0    the drop-in was printed (or written, or was already up to date)
  64   usage error: no --unit, a name that is not a unit name, --root without --write
  69   systemctl could not be asked (not installed, systemd not running, no answer): use --unit-path DIR
  71   OS error: a unit file or the drop-in directory could not be read or written
  77   --write refused: the file there was not written by gpugate (or changed meanwhile); nothing replaced
  78   no such unit: not loaded, not in --unit-path, or masked; a unit file that is a FIFO or above 4 MiB;
       a --gpu-memory-utilization no idle GPU of this host can offer; a node path systemd cannot run`,
  },
  completion: {
    usage: ['gpugate completion bash|zsh'],
    about: 'Print a completion script for bash or zsh, generated from the same table as the flags and this help.',
    examples: [
      'source <(gpugate completion bash)                        # this shell; or put it in ~/.bashrc',
      'gpugate completion bash > /etc/bash_completion.d/gpugate',
      'gpugate completion zsh > "${fpath[1]}/_gpugate"          # then restart zsh',
    ],
    exitCodes: 'Exit codes:\n  0    the script was printed\n  64   usage error (no shell, or not bash or zsh)',
  },
  bench: {
    usage: ['gpugate bench [options]'],
    about: 'Measure this host\'s poll latency through gpugate (memory only and with processes; per snapshot and per device:\nmedian, p99, max) and, when nvidia-smi is on PATH, as many `nvidia-smi --query-gpu=memory.used` runs; print the ratio.\nRead-only and bounded by --duration: changes no GPU setting.',
    examples: ['gpugate bench', 'gpugate bench --iterations 1000 --duration 60s --json'],
    exitCodes: REPORT_EXIT_CODES.replace('  78   impossible configuration: --gpus matches nothing\n', ''),
  },
};

const EXIT_CODES = `Exit codes:
  0    every selected GPU meets the criteria and is stable
  64   usage error (unknown flag, bad size or duration)
  69   NVML unavailable: library missing, init failure, driver/library mismatch, GPU lost, NVML call hung, driver already stuck in the kernel (run gpugate doctor)
  70   internal error (a bug: please report it)
  71   OS error: /proc or cgroupfs unreadable where required
  75   timed out: still busy or not yet stable (the reason is in the log and --json)
  77   no permission for a requested action (--kill-stale, --clean-shm)
  78   impossible configuration: --gpus matches nothing, threshold above total, fraction outside 0-1
  129  interrupted by SIGHUP / 130 by SIGINT / 143 by SIGTERM, after printing the last state`;

/** The text of `gpugate --help`, fitted to `width`. */
export function topLevelHelp(version: string, width = 80): string {
  return fitted(`gpugate ${version}: know whether NVIDIA GPUs are really free before a GPU service starts.

Usage: gpugate <command> [options]

Commands:
${COMMAND_NAMES.map((command) => `  ${command.padEnd(12)}${COMMAND_SUMMARIES[command]}`).join('\n')}

Run "gpugate <command> --help" for a command's options. "gpugate --version" prints the version.
Sizes: B, KiB, MiB, GiB, TiB (KB, MB, GB, TB are powers of ten). Durations: ms, s, m, h.
Environment: GPUGATE_NVML_LIBRARY (NVML library path), NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES / \
SLURM_JOB_GPUS (default selection), JOURNAL_STREAM (journald prefixes), NOTIFY_SOCKET (--notify), \
${LEASE_DIR_ENV} (select's leases, default ${DEFAULT_LEASE_DIR}), ${SYSFS_ROOT_ENV} (select's topology, default ${DEFAULT_SYSFS_ROOT}), \
GPUGATE_SYSTEMD_UNIT_PATH (systemd: read unit files from a directory), COLUMNS (the width output fits).

${EXIT_CODES}
`, width);
}

/** The text of `gpugate <command> --help`, fitted to `width`. */
export function commandHelp(command: CommandName, width = 80): string {
  const summary = SUMMARIES[command];
  const rows = optionsFor(command).map((spec) => {
    const valueName = valueNameFor(spec, command);
    const flag = `${spec.short !== undefined ? `-${spec.short}, ` : '    '}--${spec.name}${valueName !== undefined ? ` ${valueName}` : ''}`;
    const fallback = spec.defaults?.[command];
    const repeat = spec.multiple === true ? ' (repeatable)' : '';
    const help = `${spec.help}${fallback !== undefined ? ` [default: ${fallback}]` : ''}${spec.multiple === true && !spec.help.includes('repeatable') ? repeat : ''}`;
    return [flag, help] as const;
  });
  const column = Math.max(...rows.map(([flag]) => flag.length)) + 4;
  const options = rows.map(([flag, help]) => (width - column < Math.max(NARROWEST_HELP_COLUMN, ...help.split(' ').map((word) => word.length))
    ? `  ${flag}\n${wrapLine(`${HELP_UNDER_FLAG}${help}`, width, HELP_UNDER_FLAG)}`
    : wrapLine(`  ${flag.padEnd(column - 2)}${help}`, width, ' '.repeat(column)))).join('\n');
  // The about text is one paragraph: its line breaks only kept it narrow in the source.
  return `${fitted(`Usage: ${summary.usage.join('\n       ')}\n\n${summary.about.replace(/\n/g, ' ')}`, width)}

Options:
${options}

Examples:
${summary.examples.map((line) => fittedExample(line, width)).join('\n')}

${fitted(summary.exitCodes ?? EXIT_CODES, width)}
`;
}
