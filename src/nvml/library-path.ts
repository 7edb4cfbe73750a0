/**
 * Which NVML library a session should load: the `libraryPath` option, else the
 * GPUGATE_NVML_LIBRARY environment variable, else the addon's default search.
 */
import { ConfigError } from '../config-error';

/** Where the library path came from. */
export type LibraryPathSource = 'option' | 'GPUGATE_NVML_LIBRARY' | 'default';

/** The explicit path to load (null = the default search) and where it came from. */
export interface LibraryPathChoice {
  path: string | null;
  source: LibraryPathSource;
}

/** Picks the library path; throws a ConfigError when the option is not a non-empty string. */
export function resolveLibraryPath(option: unknown, env: NodeJS.ProcessEnv = process.env): LibraryPathChoice {
  if (option !== undefined) {
    if (typeof option !== 'string' || option.length === 0) {
      throw new ConfigError(
        'libraryPath',
        `gpugate: option 'libraryPath' must be a non-empty string (the path of libnvidia-ml.so.1 or the simulator), got ${JSON.stringify(option)}`,
      );
    }
    return { path: option, source: 'option' };
  }
  const fromEnv = env['GPUGATE_NVML_LIBRARY'];
  if (fromEnv !== undefined && fromEnv !== '') return { path: fromEnv, source: 'GPUGATE_NVML_LIBRARY' };
  return { path: null, source: 'default' };
}
