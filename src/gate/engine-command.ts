/**
 * Recognising an inference engine's worker by its command line.
 */

const ENGINE_RE = /VLLM::|\bvllm\b|sglang::|\bsglang\b|multiprocessing\.resource_tracker|multiprocessing\.spawn|multiprocessing-fork|ray::|text-generation|tensorrt_llm|trtllm/i;

/** True when a command line looks like an inference engine's worker. */
export function isEngineCommand(text: string | null): boolean {
  return text !== null && ENGINE_RE.test(text);
}
