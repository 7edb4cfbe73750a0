// Preloaded into every Node process of `npm run test:asan` (NODE_OPTIONS=--require): runs
// LeakSanitizer's check when the process exits normally, through the hook addon that
// run-asan-tests.mjs builds and names in GPUGATE_LSAN_HOOK. Leaks are logged, never fatal, so the
// process keeps its own exit status.
'use strict';
const hookPath = process.env.GPUGATE_LSAN_HOOK;
if (hookPath) {
  const hook = require(hookPath);
  process.on('exit', () => {
    hook.check();
  });
}
