// Ids for the NVML entry points and driver profiles of sim/driver_profiles.h.
//
// Each symbol gets a small integer id (SymbolId) used for call counting, fault matching and
// statistics; each profile an id (ProfileId) in driver order. The tables are the same in every
// library; which profile a library exports is fixed when it is built (GPUGATE_SIM_LIBRARY_PROFILE).
#pragma once

#include "driver_profiles.h"

namespace gpugate_sim {

enum ProfileId : int {
#define GPUGATE_SIM_PROFILE_ENUM(token, name, firstDriver, v3EntryBytes, summary) kProfile_##token,
  GPUGATE_SIM_PROFILES(GPUGATE_SIM_PROFILE_ENUM)
#undef GPUGATE_SIM_PROFILE_ENUM
  kProfileCount
};

// Implemented entry points first, then the stubs: both are counted and can be faulted alike.
enum SymbolId : int {
#define GPUGATE_SIM_SYMBOL_ENUM(name, firstDriver) kSym_##name,
  GPUGATE_SIM_SYMBOLS(GPUGATE_SIM_SYMBOL_ENUM)
  GPUGATE_SIM_STUBS(GPUGATE_SIM_SYMBOL_ENUM)
#undef GPUGATE_SIM_SYMBOL_ENUM
  kSymbolCount
};

/** The exported name of a symbol id. */
const char* symbolName(int id);

/** The id of a symbol name (exported by some profile), or -1. */
int symbolByName(const char* name);

/** True when `profile` exports symbol `id`. */
bool profileExports(int profile, int id);

/** The profile this library was built as (its exports follow it). */
int libraryProfile();

/** A profile's name ("r535-early"), or "?". */
const char* profileName(int profile);

/** The profile named `name`, or -1. */
int profileByName(const char* name);

/** The profile a driver version ("535.54.03") belongs to by its leading MAJOR.MINOR, or -1 without one. */
int profileForDriverVersion(const char* version);

/** The CUDA driver version (13000 = 13.0) the branch of `version` reports, or 0 without a MAJOR.MINOR. */
int cudaDriverVersionFor(const char* version);

/** Whether a driver of `version` knows field 230, the GPU recovery action (nvml.h from R570 on); true without a MAJOR.MINOR. */
bool driverHasRecoveryActionField(const char* version);

/** Bytes per entry written by the _v3 process lists in `profile` (24 or 32). */
int v3EntryBytes(int profile);

}  // namespace gpugate_sim
