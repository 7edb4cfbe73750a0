// What gpugate reads from NVML, per session and per snapshot.
//
// Identity (name, UUID, PCI bus id, minor number, compute capability, the recovery action of
// field 230, the handle) is read once when a session opens. A snapshot reads memory (_v2, else
// v1), modes, utilisation, temperature, power, optionally the process lists, and the MIG devices
// of a GPU in MIG mode (NOT_FOUND slots are holes, skipped). A device-level failure (GPU lost)
// stops that device only; any other failure nulls one field and is recorded. Nothing here loops
// on time, sleeps or decides policy.
#pragma once

#include <vector>

#include "readings.h"
#include "symbols.h"

namespace gpugate {

// Reads the identity of device `index` (handle first; a failed handle marks the device).
DeviceIdentity ReadIdentity(const SymbolTable& symbols, unsigned index);

// Reads one device for a snapshot.
DeviceReading ReadDevice(const SymbolTable& symbols, const DeviceIdentity& identity, const SnapshotRequest& request);

// Memory only, the fast path: fills `out` (NaN for unknown) and returns the NVML code.
nvmlReturn_t ReadMemory(const SymbolTable& symbols, nvmlDevice_t device, MemoryReading* out, Fn* failedFn);

}  // namespace gpugate
