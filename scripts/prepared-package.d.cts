// Types of prepared-package.cjs, for the TypeScript tests that import it.
export declare const repoRoot: string;
export declare function stagedPaths(): string[];
export declare function stagingKey(): string;
export interface PreparedPackage {
  /** The staging copy (with dist/, prebuilds/ and build/). */
  dir: string;
  /** The `npm pack` tarball. */
  tarball: string;
  /** Paths inside the tarball. */
  files: string[];
}
export declare function preparePackage(options?: { timeoutMs?: number }): PreparedPackage;
/** Why a cached entry cannot be used (a link into a clone, a missing tarball…), or null when it can. */
export declare function entryProblem(dir: string): string | null;
