// Preloaded into vitest's worker processes by `npm run test:asan` (through --execArgv only, so the
// processes that tests spawn keep their own signal handling). Vitest stops a worker with SIGTERM;
// dying by the signal would skip LeakSanitizer's exit-time check, so exit normally instead.
'use strict';
process.on('SIGTERM', () => process.exit(143));
