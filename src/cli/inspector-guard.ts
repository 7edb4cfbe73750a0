/**
 * Keeps Node's inspector shut in the `gpugate` process. By default Node opens the inspector on
 * 127.0.0.1:9229 when the process receives SIGUSR1; in gpugate, which runs as root, that would
 * hand any local user who can send it a signal a way to run code as root. Installing a listener
 * replaces that default, so this module is the first thing the command's entry point loads.
 * The window before it loads, Node's own start-up, is shut by the entry point's shebang
 * (`node --disable-sigusr1`); this listener still covers a command started as `node main.js`.
 * SIGUSR1 is then ignored while gpugate waits (and forwarded to CMD in the wrapper form).
 * Programs that use the library own their process's signals: this is not installed for them.
 */

/** The listener that stands in for Node's inspector trigger (kept for the process's lifetime). */
function ignoreInspectorSignal(): void {
  // Deliberately nothing: the signal must neither open the inspector nor end the process.
}

process.on('SIGUSR1', ignoreInspectorSignal);
