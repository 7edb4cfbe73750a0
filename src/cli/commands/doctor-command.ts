/**
 * `gpugate doctor`: runs the read-only health checks (src/doctor/) and prints them as text or one
 * JSON document; exits 0 when every check passed, 75 with warnings only, 69 with a failure.
 * GPUGATE_DEV_DIR and GPUGATE_DRIVER_VERSION_FILE point the host readers elsewhere (a chroot, a
 * test), as --kernel-log does for the kernel log. `--unit NAME` adds the checks of a systemd unit
 * (src/cli/unit-checks.ts), read with systemctl show or from --unit-path DIR.
 */
import { runDoctor } from '../../doctor/doctor';
import { checkUnitNamed } from '../unit-checks';
import { gpuSizesOf } from '../../gate/idle-room';
import { unitSourceFrom } from '../../host/systemd-unit';
import { normaliseUnitName } from '../../host/systemd-unit-name';
import { DEFAULT_CALL_TIMEOUT_MS } from '../../nvml/call-timeout';
import { parseDuration } from '../../units';
import { CliError } from '../cli-error';
import { booleanFlag, stringFlag, type CommandContext } from '../command-context';
import { doctorText } from '../doctor-text';
import { ExitCode, exitCodeForDoctorStatus } from '../exit-codes';
import { commandDocument } from '../json-envelope';
import { colourEnabled } from '../terminal-style';

function usage(message: string): CliError {
  return new CliError(message, ExitCode.usage, 'usage-error');
}

/** Run `gpugate doctor`. */
export async function runDoctorCommand(context: CommandContext): Promise<number> {
  const json = booleanFlag(context.values, 'json');
  const timeoutText = stringFlag(context.values, 'nvml-timeout');
  let callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS;
  if (timeoutText !== undefined) {
    try {
      callTimeoutMs = parseDuration(timeoutText);
    } catch (error) {
      throw usage(`--nvml-timeout ${JSON.stringify(timeoutText)}: ${error instanceof Error ? error.message : String(error)}`);
    }
    if (callTimeoutMs <= 0) throw usage(`--nvml-timeout ${JSON.stringify(timeoutText)}: expected a duration above 0`);
  }
  const kernelLog = stringFlag(context.values, 'kernel-log');
  if (kernelLog === '') throw usage('--kernel-log "": expected a file path');
  const library = stringFlag(context.values, 'library');
  if (library === '') throw usage('--library "": expected the path of libnvidia-ml.so.1');
  const env = context.env;
  const unit = stringFlag(context.values, 'unit');
  const unitPath = stringFlag(context.values, 'unit-path');
  if (unit !== undefined) {
    try {
      normaliseUnitName(unit);
    } catch (error) {
      throw usage(`--unit: ${error instanceof Error ? error.message : String(error)}`);
    }
  } else if (unitPath !== undefined) {
    throw usage('gpugate doctor: --unit-path applies to --unit NAME');
  }
  const report = await runDoctor({
    ...(unit !== undefined ? { unitChecks: (devices) => checkUnitNamed(unit, unitSourceFrom(unitPath, env), gpuSizesOf(devices)) } : {}),
    callTimeoutMs,
    env,
    ...(library !== undefined ? { libraryPath: library } : {}),
    ...(kernelLog !== undefined ? { kernelLogPath: kernelLog } : {}),
    ...(env['GPUGATE_DEV_DIR'] ? { devDir: env['GPUGATE_DEV_DIR'] } : {}),
    ...(env['GPUGATE_DRIVER_VERSION_FILE'] ? { kernelModuleVersionPath: env['GPUGATE_DRIVER_VERSION_FILE'] } : {}),
  });
  const exitCode = exitCodeForDoctorStatus(report.status);
  if (json) {
    context.stdout.write(commandDocument({ command: 'doctor', result: report.status, exitCode }, {
      takenAt: report.takenAt,
      library: report.library === null ? null : {
        path: report.library.path, driverVersion: report.library.driverVersion,
        nvmlVersion: report.library.nvmlVersion, cudaDriverVersion: report.library.cudaDriverVersion,
      },
      gpuCount: report.gpuCount,
      checks: report.checks,
    }));
  } else {
    context.stdout.write(doctorText(report, exitCode, colourEnabled(process.stdout, env)));
  }
  return exitCode;
}
