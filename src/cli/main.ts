#!/usr/bin/env -S node --disable-sigusr1
/**
 * The `gpugate` command's entry point: parses the command line, loads only the sub-command it
 * needs (startup stays close to a bare `node`), runs it, and exits with its code. Output is
 * written synchronously (files and pipes are synchronous on Linux), so process.exit() loses
 * nothing, and it is what ends the process even when an NVML call is stuck on a native thread.
 *
 * The shebang starts Node with --disable-sigusr1 (Node 22.14 or newer): a SIGUSR1 during Node's
 * own start-up, before the listener of inspector-guard.ts exists, then opens no inspector either.
 */

// First, before anything else is loaded: SIGUSR1 must never open Node's inspector (a root shell).
import './inspector-guard';
import { CliError } from './cli-error';
import type { CommandContext, CommandRunner } from './command-context';
import { ExitCode, exitCodeForError } from './exit-codes';
import { isJournalStream } from './journal-stream';
import { failureDocument, jsonRequested } from './json-error';
import { Logger, type Verbosity } from './logger';
import type { CommandName } from './option-table';
import { parseCommandLine, usageError } from './parse-command-line';
import { standardError, standardOut } from './standard-output';
import { colourEnabled, terminalWidth } from './terminal-style';

function loadCommand(command: CommandName): CommandRunner {
  // Lazy: each command pulls in the addon, /proc readers etc. only when it runs.
  switch (command) {
    case 'wait': return (require('./commands/wait-command') as typeof import('./commands/wait-command')).runWait;
    case 'check': return (require('./commands/check-command') as typeof import('./commands/check-command')).runCheck;
    case 'select': return (require('./commands/select-command') as typeof import('./commands/select-command')).runSelect;
    case 'status': return (require('./commands/status-command') as typeof import('./commands/status-command')).runStatus;
    case 'holders': return (require('./commands/holders-command') as typeof import('./commands/holders-command')).runHolders;
    case 'doctor': return (require('./commands/doctor-command') as typeof import('./commands/doctor-command')).runDoctorCommand;
    case 'demo': return (require('./commands/demo-command') as typeof import('./commands/demo-command')).runDemo;
    case 'sim': return (require('./commands/sim-command') as typeof import('./commands/sim-command')).runSim;
    case 'bench': return (require('./commands/bench-command') as typeof import('./commands/bench-command')).runBench;
    case 'systemd': return (require('./commands/systemd-command') as typeof import('./commands/systemd-command')).runSystemd;
    case 'completion': return (require('./commands/completion-command') as typeof import('./commands/completion-command')).runCompletion;
  }
}

/** How a run presents itself; `demo` sets these for the wait it runs in-process. */
export interface Presentation {
  /** Render the log for a person (compact, wrapped lines); default: stderr is a terminal. */
  terminal?: boolean;
  /** Wrap width; default the terminal's, else 80. */
  width?: number;
  /** Colour the log; default: stderr is a terminal and NO_COLOR is unset. */
  colour?: boolean;
  /** Where results (JSON, tables) go; default stdout (its width, on a terminal, fits help and tables). */
  stdout?: { write(text: string): unknown; readonly isTTY?: boolean; readonly columns?: number | undefined };
  /** Where the log goes; default stderr (its terminal-ness then decides `terminal` and `colour`). */
  stderr?: { write(text: string): unknown; readonly isTTY?: boolean; readonly columns?: number | undefined };
}

/** Run the command line; resolves to the exit code. Exported for in-process use by `demo`. */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv = process.env, presentation: Presentation = {}): Promise<number> {
  const journal = isJournalStream(env);
  // A person reads a terminal: multi-line messages keep their lines there, long ones are wrapped.
  const stderr = presentation.stderr ?? standardError();
  const terminal = presentation.terminal ?? stderr.isTTY === true;
  const style = {
    terminal,
    width: presentation.width ?? terminalWidth(stderr, env),
    colour: presentation.colour ?? colourEnabled(stderr, env),
    sink: stderr,
  };
  const stdout = presentation.stdout ?? standardOut();
  // With --json anywhere on the line, stdout carries exactly one document, whatever the exit.
  const jsonCommand = jsonRequested(argv);
  let printed = false;
  const output = jsonCommand === null ? stdout : {
    write(text: string): unknown {
      printed = true;
      return stdout.write(text);
    },
  };
  const failed = (error: unknown, code: number): number => {
    if (jsonCommand !== null && !printed) stdout.write(failureDocument(jsonCommand, error, code));
    return code;
  };
  let parsed;
  try {
    parsed = parseCommandLine(argv);
  } catch (error) {
    new Logger({ journal, verbosity: 'normal', ...style }).error(error instanceof Error ? error.message : String(error));
    return failed(error, exitCodeForError(error));
  }
  if (parsed.kind === 'top-help') {
    const { topLevelHelp } = require('./help-text') as typeof import('./help-text');
    const { packageVersion } = require('./package-info') as typeof import('./package-info');
    stdout.write(topLevelHelp(packageVersion(), terminalWidth(stdout, env)));
    return ExitCode.ok;
  }
  if (parsed.kind === 'version') {
    const { packageVersion } = require('./package-info') as typeof import('./package-info');
    stdout.write(`gpugate ${packageVersion()}\n`);
    return ExitCode.ok;
  }
  if (parsed.values.help === true) {
    const { commandHelp } = require('./help-text') as typeof import('./help-text');
    stdout.write(commandHelp(parsed.command, terminalWidth(stdout, env)));
    return ExitCode.ok;
  }
  const verbosity: Verbosity = parsed.values.quiet === true ? 'quiet' : parsed.values.verbose === true ? 'verbose' : 'normal';
  if (parsed.values.quiet === true && parsed.values.verbose === true) {
    const conflict = usageError(`gpugate ${parsed.command}: -q and -v exclude each other`, parsed.command);
    new Logger({ journal, verbosity: 'normal', ...style }).error(conflict.message);
    return failed(conflict, ExitCode.usage);
  }
  const logger = new Logger({ journal, verbosity, ...style });
  const context: CommandContext = {
    values: parsed.values,
    wrapped: parsed.wrapped,
    env,
    logger,
    stdout: output,
    journal,
  };
  // wait, check and select report an interruption in their own document; the others' is the failure document.
  const watch = jsonCommand === null || GATED_COMMANDS.includes(jsonCommand) ? null : watchForInterruption();
  try {
    const running = loadCommand(parsed.command)(context);
    const code = await (watch === null ? running : Promise.race([running, watch.interrupted]));
    if (printed || jsonCommand === null) return code;
    const missing = new Error(`gpugate ${parsed.command} ended with exit ${code} without its --json document`);
    logger.error(`internal error (a bug in gpugate, please report it): ${missing.message}`);
    return failed(missing, ExitCode.software);
  } catch (error) {
    const code = exitCodeForError(error);
    const message = error instanceof Error ? error.message : String(error);
    if (code === ExitCode.software && !(error instanceof CliError)) {
      logger.error(`internal error (a bug in gpugate, please report it): ${error instanceof Error && error.stack !== undefined ? error.stack : message}`);
    } else {
      logger.error(message);
    }
    return failed(error, code);
  } finally {
    watch?.dispose();
  }
}

/** The commands that watch for SIGINT / SIGTERM / SIGHUP themselves (src/cli/interrupt-watch.ts). */
const GATED_COMMANDS: readonly CommandName[] = ['wait', 'check', 'select'];

/**
 * For a command that does not watch for signals itself: a promise that rejects with the
 * InterruptedError of the first SIGINT / SIGTERM / SIGHUP, so its --json document can say so
 * (130 / 143 / 129); a command stuck in NVML is ended by the watch a second later regardless.
 */
function watchForInterruption(): { interrupted: Promise<never>; dispose(): void } {
  const { InterruptWatch } = require('./interrupt-watch') as typeof import('./interrupt-watch');
  const watch = new InterruptWatch(() => undefined);
  const interrupted = new Promise<never>((_resolve, reject) => {
    watch.signal.addEventListener('abort', () => reject(watch.signal.reason), { once: true });
  });
  interrupted.catch(() => undefined); // handled by the race; never an unhandled rejection
  return { interrupted, dispose: () => watch.dispose() };
}

/** The log for what happens outside a command (before it starts, after it ends): the same form as a command's. */
function processLogger(): Logger {
  const stderr = standardError();
  const env = process.env;
  return new Logger({ journal: isJournalStream(env), verbosity: 'normal', terminal: stderr.isTTY === true, width: terminalWidth(stderr, env), colour: colourEnabled(stderr, env), sink: stderr });
}

if (require.main === module) {
  const refusal = (require('./node-requirement') as typeof import('./node-requirement')).unsupportedNode();
  if (refusal !== null) {
    processLogger().error(refusal);
    process.exit(ExitCode.config);
  }
  // (`gpugate status | head -1`: a closed stdout is the reader's choice, not a crash; standardOut ignores it.)
  // A promise abandoned with a stuck NVML call may reject after the outcome is decided: never
  // let that turn the chosen exit code into Node's generic 1.
  process.on('unhandledRejection', (reason: unknown) => {
    processLogger().error(`ignored a late failure: ${reason instanceof Error ? reason.message : String(reason)}`);
  });
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error: unknown) => {
      processLogger().error(`internal error (a bug in gpugate, please report it): ${error instanceof Error ? error.stack : String(error)}`);
      process.exit(ExitCode.software);
    },
  );
}
