// Types of node-runtime.cjs, for the TypeScript tests that import it.
/** The directory of an installed Node `major` (bin/node, include/node), installed from the npm registry when the cache has none. */
export declare function nodeRuntime(major: number): string;
/** The cache of installed runtimes ($XDG_CACHE_HOME or ~/.cache, /gpugate-node-runtimes). */
export declare function runtimeCache(): string;
