/**
 * What a CUDA context costs on each GPU model, in device memory: vLLM creates its context before
 * it reads free memory, so the free memory it sees at startup is NVML's free minus this. One
 * entry per model name pattern, first match wins; each names its source. The cost grows with the
 * SM count, so an unknown model gets the documented default.
 */

const MiB = 1024 ** 2;

/** One GPU model's CUDA context size and where the figure comes from. */
export interface CudaContextSize {
  /** Matched against NVML's device name, e.g. "NVIDIA RTX PRO 6000 Blackwell Server Edition". */
  model: RegExp;
  bytes: number;
  source: string;
}

/** The measured sizes, first match wins. */
export const CUDA_CONTEXT_SIZES: readonly CudaContextSize[] = [
  { model: /RTX PRO 6000/i, bytes: 555 * MiB, source: 'measured on RTX PRO 6000 (ggml-org/llama.cpp PR #23604)' },
  { model: /RTX 4060 Ti/i, bytes: 107 * MiB, source: 'measured on RTX 4060 Ti (ggml-org/llama.cpp PR #23604)' },
];

/**
 * 512 MiB for a model not in the table: within the 300 MiB-1 GiB reported across models
 * (pytorch#20532, #86493; LMCache#4019). `contextBytes` overrides it where it was measured.
 */
export const DEFAULT_CUDA_CONTEXT_BYTES = 512 * MiB;

/** The CUDA context size of the GPU model named `name` (null: not reported), and where the figure comes from. */
export function cudaContextBytes(name: string | null): { bytes: number; source: string } {
  const entry = name === null ? undefined : CUDA_CONTEXT_SIZES.find((size) => size.model.test(name));
  return entry === undefined ? { bytes: DEFAULT_CUDA_CONTEXT_BYTES, source: 'default for a model not in the table' } : { bytes: entry.bytes, source: entry.source };
}
