// Small helpers the NVML entry points share: resolving a handle to the live device (or MIG
// device) and copying strings with NVML's buffer rules.
#pragma once

#include <string>

#include "runtime.h"

namespace gpugate_sim {

/** What a handle points at in the live scenario. */
struct Resolved {
  int index = -1;
  SimDevice* device = nullptr;     // the GPU (the parent for MIG handles)
  SimMigDevice* mig = nullptr;     // non-null for MIG handles
};

/**
 * Resolves `h` against the live scenario. Caller holds rt.mu. False for foreign pointers,
 * indices past the device count, and MIG slots that are not populated (or MIG mode off).
 */
bool resolve(Runtime& rt, nvmlDevice_t h, Resolved& out);

/** Copies `s` into `buf` (NUL-terminated): INVALID_ARGUMENT for NULL, INSUFFICIENT_SIZE when short. */
nvmlReturn_t copyString(const std::string& s, char* buf, unsigned int length);

/** True when MIG mode is currently on for `d`. */
inline bool migEnabled(const SimDevice& d) { return d.migMode.supported && d.migMode.value; }

/** Parses NVML's PCI bus id forms (implemented in scenario_reader.cc). */
bool parsePciBusId(const std::string& text, unsigned& domain, unsigned& bus, unsigned& device, unsigned& function);

}  // namespace gpugate_sim
