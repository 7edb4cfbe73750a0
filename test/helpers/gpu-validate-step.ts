/**
 * The step record every scripts/gpu-validate/ step program writes (see step-result.cjs), as the
 * validation tests read it.
 */
export interface StepRecord {
  step: string;
  status: 'pass' | 'fail' | 'skip';
  summary: string;
  checks: Array<{ name: string; ok: boolean; detail: string }>;
  data: Record<string, unknown>;
}

export const MIB = 1024 * 1024;
