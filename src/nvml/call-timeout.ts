/**
 * The deadline of one NVML call: its default and its range. The session enforces it
 * (src/nvml/session.ts) and passes it to every blocking native call; the command line's
 * `--nvml-timeout` defaults to it. Kept apart from the session so `--help` needs no NVML code.
 */

import { MAX_DURATION_MS } from '../units';

/** Default deadline of one NVML request, in milliseconds, counted from when the NVML thread starts it. */
export const DEFAULT_CALL_TIMEOUT_MS = 10_000;

/** The longest deadline: the longest delay a timer can hold (2^31 - 1 ms), as for every duration. */
export const MAX_CALL_TIMEOUT_MS = MAX_DURATION_MS;
