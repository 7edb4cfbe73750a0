/**
 * `gpugate systemd --unit NAME`: prints the drop-in that puts gpugate in front of an existing
 * unit, fitted to that unit (src/cli/systemd-drop-in.ts); with `--write`, puts it in
 * /etc/systemd/system/NAME.d/gpugate.conf (below `--root`), replacing only a file gpugate wrote.
 * The unit is read with `systemctl show`, or from its files with `--unit-path DIR`; the GPUs'
 * sizes, which the gate must fit, from NVML.
 */
import { join } from 'node:path';
import { findUnitGate } from '../unit-commands';
import { writeOwnedFile } from '../../host/owned-file';
import { readRegularFile } from '../../host/safe-file';
import { readUnitProperties, unitSourceFrom, type UnitProperties } from '../../host/systemd-unit';
import { normaliseUnitName } from '../../host/systemd-unit-name';
import type { CommandContext } from '../command-context';
import { booleanFlag, stringFlag } from '../command-context';
import { ExitCode } from '../exit-codes';
import { commandDocument } from '../json-envelope';
import { usageError } from '../parse-command-line';
import { readHostGpuSizes } from '../gpu-sizes';
import { resolveGateProgram } from '../gate-program';
import { buildDropIn, DROP_IN_FILE, DROP_IN_MARKER, GATE_ENGINE } from '../systemd-drop-in';

/** A drop-in gpugate wrote is a few lines: a larger file is not one. */
const DROP_IN_MAX_BYTES = 1 << 20;

/** Where systemd reads local drop-ins, relative to the root. */
const SYSTEM_UNIT_DIR = join('etc', 'systemd', 'system');

/** Run `gpugate systemd`. */
export async function runSystemd(context: CommandContext): Promise<number> {
  const json = booleanFlag(context.values, 'json');
  return systemd(context, json);
}

async function systemd(context: CommandContext, json: boolean): Promise<number> {
  const unitText = stringFlag(context.values, 'unit');
  if (unitText === undefined) throw usageError('gpugate systemd: missing --unit NAME (the unit to protect, e.g. --unit vllm.service)', 'systemd');
  let name: string;
  try {
    name = normaliseUnitName(unitText);
  } catch (error) {
    throw usageError(`--unit: ${error instanceof Error ? error.message : String(error)}`, 'systemd');
  }
  const root = stringFlag(context.values, 'root') ?? '/';
  const write = booleanFlag(context.values, 'write');
  if (stringFlag(context.values, 'root') !== undefined && !write) throw usageError('gpugate systemd: --root only applies to --write', 'systemd');
  if (root === '') throw usageError('--root "": expected a directory', 'systemd');
  const source = unitSourceFrom(stringFlag(context.values, 'unit-path'), context.env);
  const unit = await readUnitProperties(name, source);
  for (const note of unit.notes) context.logger.warning(note);
  const target = join(root, SYSTEM_UNIT_DIR, `${name}.d`, DROP_IN_FILE);
  const keepExistingGate = hasForeignGate(unit, target);
  const sizes = keepExistingGate ? null : await readHostGpuSizes();
  const program = resolveGateProgram(context.env);
  const dropIn = buildDropIn(unit, program, { keepExistingGate, gpus: sizes?.kind === 'read' ? sizes.gpus : null });
  const limits = dropIn.startLimitIntervalSec === 0 || dropIn.startLimitBurst === 0 ? 'the unit\'s start limit kept off' : `StartLimitIntervalSec=${dropIn.startLimitIntervalSec / 60}min for RestartSec=${(unit.restartUsec / 1e6).toString()}s`;
  const fitted = `${dropIn.minFreeFrom === 'gpu-memory-utilization' ? `--for ${GATE_ENGINE} --min-free ${dropIn.minFree} from its --gpu-memory-utilization` : `--for ${GATE_ENGINE} --min-free ${dropIn.minFree} (vLLM's default; ExecStart= sets no --gpu-memory-utilization)`}, ${limits}`;
  context.logger.info(`drop-in for ${name} (read ${source.kind === 'systemctl' ? 'with systemctl show' : `from the unit files in ${source.directory}`}): ${fitted}${dropIn.execStartPre === null ? '; the unit already runs gpugate wait, so no second ExecStartPre=' : ''}${write ? '' : `; --write puts it in ${target}`}`);
  for (const line of dropIn.kept) context.logger.info(line);
  if (dropIn.execStartPre !== null) {
    if (program.why !== null) context.logger.info(`the gate names node and ${program.command} by absolute path: ${program.why}`);
    for (const line of program.unstable) context.logger.warning(`the gate line depends on a path a service should not depend on: ${line}; install the command (npm install -g gpugate, as root) and run gpugate systemd again`);
  }
  if (sizes?.kind === 'unknown') {
    context.logger.warning(`the gate (--for ${GATE_ENGINE} --min-free ${dropIn.minFree} --margin ${dropIn.margin}) was not checked against this host's GPUs, since NVML could not be read (${sizes.reason}); on the GPU host, gpugate doctor --unit ${name} checks that an idle GPU can pass it`);
  }
  let outcome: string | null = null;
  if (write) outcome = writeOwnedFile(target, dropIn.text, DROP_IN_MARKER);
  if (json) {
    context.stdout.write(commandDocument({ command: 'systemd', result: 'ok', exitCode: ExitCode.ok }, {
      unit: { name: unit.name, source: unit.source, fragmentPath: unit.fragmentPath, dropInPaths: unit.dropInPaths },
      path: target,
      written: outcome,
      engine: GATE_ENGINE,
      minFree: dropIn.minFree,
      minFreeFrom: dropIn.minFreeFrom,
      margin: dropIn.margin,
      gpus: sizes?.kind === 'read' ? sizes.gpus.map((gpu) => ({ index: gpu.index, totalBytes: gpu.totalBytes, reservedBytes: gpu.reservedBytes })) : null,
      notifyAccess: dropIn.notifyAccess,
      kept: dropIn.kept,
      startLimitIntervalSec: dropIn.startLimitIntervalSec,
      startLimitBurst: dropIn.startLimitBurst,
      timeoutStartSec: dropIn.timeoutStartSec,
      execStartPre: dropIn.execStartPre,
      gateProgram: { form: program.form, command: program.command, runningFrom: program.runningFrom, why: program.why, unstable: program.unstable },
      text: dropIn.text,
    }));
  } else if (outcome === null) {
    // Exactly the file, so `> NAME.d/gpugate.conf` gives what --write would (marker line first).
    context.stdout.write(dropIn.text);
  } else {
    const what = outcome === 'unchanged' ? 'is already up to date' : outcome === 'created' ? 'written' : 'replaced';
    context.stdout.write(`${target} ${what}\n${outcome === 'unchanged' ? '' : 'Now run: systemctl daemon-reload   (the drop-in applies from the next start of the unit)\n'}`);
  }
  return ExitCode.ok;
}

/** Whether the unit runs gpugate wait in ExecStartPre= from a file other than the drop-in gpugate writes (at `target`, or as NAME.d/gpugate.conf among the unit's drop-ins). */
function hasForeignGate(unit: UnitProperties, target: string): boolean {
  const gates = unit.execStartPre.filter((command) => findUnitGate({ ...unit, execStartPre: [command], execStart: [] }) !== null).length;
  if (gates === 0) return false;
  // A gate that an earlier --write put in place is ours to replace.
  const own = [target, ...unit.dropInPaths.filter((path) => path.endsWith(`/${unit.name}.d/${DROP_IN_FILE}`))];
  const ours = Math.max(0, ...own.map(gateLinesOfOwnFile));
  return gates > ours;
}

/** The gpugate ExecStartPre= lines of a drop-in gpugate wrote (0 when the file is missing or not ours). */
function gateLinesOfOwnFile(path: string): number {
  try {
    // Never through a link, never blocked by a FIFO planted at the target.
    const text = readRegularFile(path, DROP_IN_MAX_BYTES)?.text ?? '';
    if (!text.startsWith(DROP_IN_MARKER)) return 0;
    return text.split('\n').filter((line) => line.startsWith('ExecStartPre=') && / wait /.test(line)).length;
  } catch {
    return 0;
  }
}
