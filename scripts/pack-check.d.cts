// Types of pack-check.cjs, for the TypeScript tests that import it.
export declare const REQUIRED_FILES: string[];
export declare const REQUIRED_PATTERNS: [string, RegExp][];
export declare const FORBIDDEN_PATTERNS: [string, RegExp][];
export declare function checkPackFiles(files: string[]): string[];
export declare function checkDocLinks(files: string[], readText: (file: string) => string): string[];
export declare function listTarball(tarball: string): string[];
