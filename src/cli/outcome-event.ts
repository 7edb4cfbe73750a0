/**
 * The last log line of a run that did not succeed: `event=failed result=timeout reason="…"
 * exit=75 exit_name=TEMPFAIL` for programs, and for a person the reason itself with its exit code.
 */

import { exitCodeName } from './exit-codes';
import { logEvent, type LogEvent } from './logfmt';

/** The final event for `result` (timeout, busy, interrupted, …), its reason and the exit code it ends with. */
export function outcomeEvent(result: string, reason: string, exitCode: number): LogEvent {
  const name = exitCodeName(exitCode);
  return logEvent('failed', [['result', result], ['reason', reason], ['exit', exitCode], ['exit_name', name]], `${reason} (exit ${exitCode}/${name})`);
}
