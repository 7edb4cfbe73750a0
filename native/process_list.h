// Reading NVML's running-process lists safely.
//
// For each list (compute, graphics, MPS) with the variant that bound: the count-then-fill
// protocol (size call, then a fill with headroom, retried a bounded number of times while the
// live list keeps growing), into a buffer sized for the widest known entry (32 bytes) and
// pre-filled with a sentinel so the stride the library really wrote can be measured. The
// measured stride is snapped to 16/24/32 and checked for plausibility (pid <= pid_max, instance
// ids 0xFFFFFFFF or small, memory sum within the device's memory) before any entry is trusted.
// The three lists are merged by pid with a bitmask of the lists each pid appeared in.
//
// A size answer above kMaxProcessEntries is a driver fault, not a list: nothing is allocated
// for it and the list carries NVML_ERROR_INSUFFICIENT_SIZE with the claimed count in its message.
#pragma once

#include <vector>

#include "readings.h"
#include "symbols.h"

namespace gpugate {

// The most entries read from one list (2 MiB of buffer at the widest stride). Far above what a
// GPU runs; a larger size answer (0xFFFFFFFF has been seen) would otherwise allocate gigabytes.
constexpr unsigned kMaxProcessEntries = 65536;

struct ProcessListOutcome {
  bool deviceLost = false;  // a device-level failure: `lostError` holds it
  CallError lostError;
};

// Reads and merges the three lists for `device`. `usedBytes` / `totalBytes` (NaN if unknown)
// bound the plausible memory sum. Fills `out` (out->read false on failure) and appends
// field errors ("processes", "processes.graphics", "processes.mps") to `errors`.
ProcessListOutcome ReadProcessLists(const SymbolTable& symbols, nvmlDevice_t device, double usedBytes,
                                    double totalBytes, ProcessListReading* out, std::vector<CallError>* errors);

// The largest pid the kernel hands out (/proc/sys/kernel/pid_max), read once.
unsigned PidMax();

}  // namespace gpugate
