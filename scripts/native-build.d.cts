// Types of native-build.cjs, for the TypeScript tests that import it.
/** The binding.gyp targets `gpugate demo` needs: the addon and the simulator of the current driver. */
export declare const QUICK_START_TARGETS: readonly string[];
/** The binding.gyp target that builds every driver profile and installs each under the driver's file name. */
export declare const SIM_PROFILES_TARGET: string;
/** The install script: builds the quick-start targets when no addon loads; true when it built. */
export declare function install(root?: string): boolean;
/** The driver profiles' files under build/Release (sim/<profile>/libnvidia-ml.so.1) that are not there. */
export declare function missingSimProfiles(root?: string): string[];
/** Builds the driver profiles when one is missing, never the addon; true when it built. */
export declare function buildSimProfiles(root?: string): boolean;
