// Handle resolution and NVML string-buffer rules shared by the entry points (see lookup.h).
#include "lookup.h"

#include <cstring>

namespace gpugate_sim {

bool resolve(Runtime& rt, nvmlDevice_t h, Resolved& out) {
  int index, slot;
  if (!decodeHandle(h, index, slot)) return false;
  if (index < 0 || static_cast<size_t>(index) >= rt.live.devices.size()) return false;
  SimDevice& d = rt.live.devices[static_cast<size_t>(index)];
  out.index = index;
  out.device = &d;
  out.mig = nullptr;
  if (slot < 0) return true;
  if (!migEnabled(d)) return false;
  for (auto& m : d.migDevices) {
    if (m.slot == slot) {
      out.mig = &m;
      return true;
    }
  }
  return false;
}

nvmlReturn_t copyString(const std::string& s, char* buf, unsigned int length) {
  if (buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (length < s.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(buf, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

}  // namespace gpugate_sim
