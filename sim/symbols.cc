// Name <-> id lookup for the simulator's exported NVML symbols (see symbols.h).
#include "symbols.h"

#include <cstring>

namespace gpugate_sim {

namespace {
const char* const kNames[] = {
#define GPUGATE_SIM_SYMBOL_NAME(name, versioned) #name,
    GPUGATE_SIM_SYMBOLS(GPUGATE_SIM_SYMBOL_NAME)
#undef GPUGATE_SIM_SYMBOL_NAME
};
}  // namespace

const char* symbolName(int id) {
  if (id < 0 || id >= kSymbolCount) return "?";
  return kNames[id];
}

int symbolByName(const char* name) {
  if (name == nullptr) return -1;
  for (int i = 0; i < kSymbolCount; i++) {
    if (strcmp(kNames[i], name) == 0) return i;
  }
  return -1;
}

}  // namespace gpugate_sim
