/**
 * The package's public runtime names: what `require('gpugate')` and `import 'gpugate'` give, and
 * what README.md's "The API" section documents. Adding a name is a semver promise: add it here,
 * to src/index.ts and to README in one change.
 */
export const PUBLIC_RUNTIME_NAMES: readonly string[] = [
  'ConfigError', 'DeviceSelectionError', 'ErrorCode', 'FileSystemError', 'GpuLeaseError', 'GpuWaitAbortError',
  'GpuWaitTimeoutError', 'GpugateError', 'HOLDER_CATALOGUE', 'MAX_PENDING_CALLS', 'NativeLoadError', 'NvmlError', 'SimLibraryNotFoundError',
  'SimulatedHost', 'UnsafePathError', 'UsageError', 'checkGpusOnce', 'findSimLibrary', 'findSimLibraryFor', 'gate', 'gateDefaults',
  'inspectHolders', 'isGpugateError', 'openNvml', 'parseDuration', 'parseSize', 'runBench', 'runDoctor', 'selectGpus', 'simDriverProfiles',
  'simProfileForScenario', 'waitForGpusFree',
];

/** The issue that trimmed the surface capped it: more names than this is a surface nobody can keep stable. */
export const MAX_PUBLIC_RUNTIME_NAMES = 40;
