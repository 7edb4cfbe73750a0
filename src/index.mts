/**
 * gpugate's ES module entry: the same API as the CommonJS entry (dist/index.js), re-exported so
 * that `import { openNvml } from 'gpugate'` works. One module instance serves both.
 */
export * from './index.js';
