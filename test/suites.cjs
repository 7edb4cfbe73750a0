// suites.cjs: which test file runs in which suite, written once. The vitest configs read it, and
// test/suites.test.ts checks that every test file belongs to exactly one suite, that each suite
// has its npm script and that .ci/run runs every one.
//
// `npm test` (vitest.config.mts) is what a newcomer runs: unit, native (the real addon against the
// simulator), CLI and reliability tests, a few minutes on two cores, compiling nothing but dist/
// and the simulator's driver profiles a fresh clone lacks. The slow suites (vitest.slow.config.mts,
// one vitest project each, `npm run test:<name>`) pack and install the tarball, build third-party
// clients, run other Node versions or whole programs. Entries are globs relative to the
// repository root, so a suite can name a folder (`test/pack/**`) once tests live in folders.

'use strict';

/** @typedef {{ name: string, why: string, files: string[], sequential?: boolean }} TestSuite */

/** Every file vitest could run: the unit, native, CLI and slow tests, and the systemd end-to-end files. */
const ALL_TEST_FILES = ['test/**/*.test.ts', 'test/**/*.e2e.ts'];

/** @type {TestSuite[]} */
const SLOW_SUITES = [
  {
    name: 'pack',
    why: 'npm pack (prebuildify rebuilds the addon) and npm install of the tarball into consumer projects and a global prefix',
    files: ['test/pack/pack.test.ts', 'test/pack/pack-cache.test.ts', 'test/pack/pack-systemd-form.test.ts'],
    // Its files share one prepared tarball (scripts/prepared-package.cjs): two preparing it at
    // once, each rebuilding the addon on two cores, outran the setup's timeout.
    sequential: true,
  },
  {
    name: 'multi-node',
    why: 'the prepared package (prebuildify rebuilds the addon) loaded under Node 20, 22 and 24',
    files: ['test/pack/multi-node.test.ts'],
  },
  {
    name: 'build',
    why: 'configures the CMake build from binding.gyp (cmake)',
    files: ['test/build/build-config.test.ts'],
  },
  {
    name: 'clients',
    why: 'third-party NVML clients built with cargo, go and cc read the simulator',
    files: ['test/clients/rust-reader.test.ts', 'test/clients/go-client.test.ts', 'test/bench/bench-c-programs.test.ts'],
  },
  {
    name: 'bench',
    why: 'the benchmark harness run as users run it (npm run bench -- --quick)',
    files: ['test/bench/bench-harness.test.ts'],
  },
  {
    name: 'gpu-validate',
    why: 'the GPU host validation script and its step programs, run whole against the simulator',
    files: ['test/gpu-validate/gpu-validate.test.ts', 'test/gpu-validate/gpu-validate-judging.test.ts', 'test/gpu-validate/open-cost.test.ts'],
  },
];

/** @type {TestSuite} The systemd end-to-end suite (vitest.e2e.config.mts, `npm run test:e2e`). */
const E2E_SUITE = {
  name: 'e2e',
  why: 'boots a real systemd in private namespaces (root, minutes)',
  files: ['test/e2e-systemd/**/*.e2e.ts'],
};

/** @type {TestSuite} `npm test`: every test file no other suite names. */
const DEFAULT_SUITE = {
  name: 'default',
  why: "the README's test command: unit, native against the simulator, CLI, reliability",
  files: ['test/**/*.test.ts'],
};

/** The globs `npm test` leaves to the slow suites and the end-to-end suite. */
const DEFAULT_SUITE_EXCLUDES = [...SLOW_SUITES, E2E_SUITE].flatMap((suite) => suite.files);

module.exports = { ALL_TEST_FILES, SLOW_SUITES, E2E_SUITE, DEFAULT_SUITE, DEFAULT_SUITE_EXCLUDES };
