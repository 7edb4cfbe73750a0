// Types of sanitizer-report.cjs, for the TypeScript tests that import it.
export interface SanitizerLeak {
  kind: string;
  bytes: number;
  objects: number;
  frames: string[];
  owner: 'ours' | 'foreign' | 'unknown';
  text: string;
}
export declare function isOurFrame(frame: string, repoRoot: string): boolean;
export declare function classifyLeak(frames: string[], repoRoot: string): 'ours' | 'foreign' | 'unknown';
export declare function parseSanitizerLog(text: string, repoRoot: string): { leaks: SanitizerLeak[]; errors: string[] };
export declare function readSanitizerLogs(dir: string, repoRoot: string): ({ file: string; text: string } & ReturnType<typeof parseSanitizerLog>)[];
