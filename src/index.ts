/** gpugate: the public API. */
export * from './types';
