/** gpugate: the public API. */
export * from './types';
export * from './usage-error';
export * from './config-error';
export * from './units';
export * from './device-selection-error';
export * from './devices';
export * from './criteria';
export * from './wait-timeout-error';
export * from './wait';
export * from './stale';
export * from './shm';
export * from './reap';
export * from './native-load-error';
export * from './sim-library';
