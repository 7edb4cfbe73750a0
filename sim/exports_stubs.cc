// The functions of the R580 header the simulator has nothing to report for (sim/driver_profiles.h,
// GPUGATE_SIM_STUBS): each is counted, checked for init and faults like any entry point, and
// answers NVML_ERROR_NOT_SUPPORTED, as a real driver does for a feature the GPU lacks.
//
// Each stub is defined as `nvmlReturn_t name(...)` whatever its real parameters: on x86-64 (System
// V) and AArch64 the arguments travel in registers or on the caller's stack, the caller cleans up,
// and a function that never reads them and returns a 4-byte enum in the return register is called
// safely through any prototype. None of them touches an argument.
#include "export.h"
#include "runtime.h"

using namespace gpugate_sim;

namespace {
nvmlReturn_t notSupported(int sym) {
  nvmlReturn_t rc;
  if (gate(sym, -1, &rc)) return rc;
  return NVML_ERROR_NOT_SUPPORTED;
}
}  // namespace

#define GPUGATE_SIM_STUB_DEFINE(name, firstDriver) \
  GPUGATE_SIM_API nvmlReturn_t name(...) { return notSupported(kSym_##name); }
GPUGATE_SIM_STUBS(GPUGATE_SIM_STUB_DEFINE)
#undef GPUGATE_SIM_STUB_DEFINE
