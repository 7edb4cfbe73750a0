// The simulator's own exports beyond NVML: gpugateSimLastError, gpugateSimCallCount, and the
// statistics file (GPUGATE_SIM_STATS) written at every final nvmlShutdown and at process exit.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

#include "export.h"
#include "runtime.h"

namespace gpugate_sim {

void writeStats() {
  const char* path = getenv("GPUGATE_SIM_STATS");
  if (path == nullptr || path[0] == '\0') return;
  Runtime& rt = runtime();
  std::string text = "{\"calls\":{";
  bool first = true;
  for (int s = 0; s < kSymbolCount; s++) {
    long long n = rt.counts[s].load(std::memory_order_relaxed);
    if (n == 0) continue;
    if (!first) text += ",";
    first = false;
    text += "\"";
    text += symbolName(s);
    text += "\":";
    text += std::to_string(n);
  }
  text += "}}\n";
  // Write a sibling temp file and rename it, so a reader never sees half a file.
  std::string tmp = std::string(path) + ".tmp." + std::to_string(static_cast<long>(getpid()));
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  bool ok = fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = (fclose(f) == 0) && ok;
  if (ok) rename(tmp.c_str(), path);
  else remove(tmp.c_str());
}

namespace {
__attribute__((destructor)) void writeStatsAtExit() { writeStats(); }
thread_local std::string t_lastError;
}  // namespace

}  // namespace gpugate_sim

/** The last scenario error (one line, "FILE:LINE:COL: expected ..."), or "" when none. */
GPUGATE_SIM_API const char* gpugateSimLastError(void) {
  gpugate_sim::Runtime& rt = gpugate_sim::runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  // Copy into a per-thread buffer so the pointer stays valid while other threads reload.
  gpugate_sim::t_lastError = rt.lastError;
  return gpugate_sim::t_lastError.c_str();
}

/** How many times `symbol` has been called in this process; -1 when it is not an exported name. */
GPUGATE_SIM_API long long gpugateSimCallCount(const char* symbol) {
  int id = gpugate_sim::symbolByName(symbol);
  if (id < 0) return -1;
  return gpugate_sim::runtime().counts[id].load(std::memory_order_relaxed);
}
