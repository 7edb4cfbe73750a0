// Types of suites.cjs, for the vitest configs and test/suites.test.ts.
export interface TestSuite {
  /** The vitest project name; `npm run test:<name>` runs the suite (`npm test` the default one). */
  readonly name: string;
  /** What makes it slow, or what it needs beyond the quick start. */
  readonly why: string;
  /** Globs of its test files, relative to the repository root. */
  readonly files: readonly string[];
  /** Its files share one preparation (the packed tarball), so they run one at a time. */
  readonly sequential?: boolean;
}
/** Every file vitest could run: the unit, native, CLI and slow tests, and the systemd end-to-end files. */
export declare const ALL_TEST_FILES: readonly string[];
export declare const SLOW_SUITES: readonly TestSuite[];
/** The systemd end-to-end suite (vitest.e2e.config.mts, `npm run test:e2e`). */
export declare const E2E_SUITE: TestSuite;
/** `npm test`: every test file no other suite names. */
export declare const DEFAULT_SUITE: TestSuite;
/** The globs `npm test` leaves to the slow suites and the end-to-end suite. */
export declare const DEFAULT_SUITE_EXCLUDES: readonly string[];
