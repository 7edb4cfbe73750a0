// Name <-> id lookup for the simulator's NVML symbols and driver profiles (see symbols.h).
#include "symbols.h"

#include <cstdlib>
#include <cstring>

#ifndef GPUGATE_SIM_LIBRARY_PROFILE
#error "build each simulator library with -DGPUGATE_SIM_LIBRARY_PROFILE=<profile token> (see binding.gyp)"
#endif

namespace gpugate_sim {

namespace {
const char* const kNames[] = {
#define GPUGATE_SIM_SYMBOL_NAME(name, firstDriver) #name,
    GPUGATE_SIM_SYMBOLS(GPUGATE_SIM_SYMBOL_NAME)
    GPUGATE_SIM_STUBS(GPUGATE_SIM_SYMBOL_NAME)
#undef GPUGATE_SIM_SYMBOL_NAME
};

const long kFirstDriver[] = {
#define GPUGATE_SIM_SYMBOL_FIRST(name, firstDriver) firstDriver,
    GPUGATE_SIM_SYMBOLS(GPUGATE_SIM_SYMBOL_FIRST)
    GPUGATE_SIM_STUBS(GPUGATE_SIM_SYMBOL_FIRST)
#undef GPUGATE_SIM_SYMBOL_FIRST
};

struct Profile {
  const char* name;
  long firstDriver;
  int v3EntryBytes;
};

const Profile kProfiles[] = {
#define GPUGATE_SIM_PROFILE_ROW(token, name, firstDriver, v3EntryBytes, summary) {name, firstDriver, v3EntryBytes},
    GPUGATE_SIM_PROFILES(GPUGATE_SIM_PROFILE_ROW)
#undef GPUGATE_SIM_PROFILE_ROW
};

#define GPUGATE_SIM_PROFILE_ID(token) kProfile_##token
#define GPUGATE_SIM_PROFILE_ID_OF(token) GPUGATE_SIM_PROFILE_ID(token)
constexpr int kLibraryProfile = GPUGATE_SIM_PROFILE_ID_OF(GPUGATE_SIM_LIBRARY_PROFILE);
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

bool profileExports(int profile, int id) {
  return id >= 0 && id < kSymbolCount && profile >= 0 && profile < kProfileCount && kFirstDriver[id] <= kProfiles[profile].firstDriver;
}

int libraryProfile() { return kLibraryProfile; }

const char* profileName(int profile) { return profile >= 0 && profile < kProfileCount ? kProfiles[profile].name : "?"; }

int profileByName(const char* name) {
  for (int p = 0; name != nullptr && p < kProfileCount; p++) {
    if (strcmp(kProfiles[p].name, name) == 0) return p;
  }
  return -1;
}

namespace {
/** A driver version's leading MAJOR.MINOR as major * 1000 + minor ("535.54.03": 535054), or -1. */
long driverKey(const char* version) {
  const char* p = version;
  char* end = nullptr;
  if (p == nullptr || *p < '0' || *p > '9') return -1;
  long major = strtol(p, &end, 10);
  if (*end != '.' || end[1] < '0' || end[1] > '9') return -1;
  long minor = strtol(end + 1, &end, 10);
  if (minor > 999) return -1;
  return major * 1000 + minor;
}

struct CudaBranch {
  long firstDriver;
  int cudaDriverVersion;
};

const CudaBranch kCudaBranches[] = {
#define GPUGATE_SIM_CUDA_ROW(firstDriver, cudaDriverVersion) {firstDriver, cudaDriverVersion},
    GPUGATE_SIM_CUDA_BRANCHES(GPUGATE_SIM_CUDA_ROW)
#undef GPUGATE_SIM_CUDA_ROW
};
}  // namespace

int profileForDriverVersion(const char* version) {
  // The leading MAJOR.MINOR decides; a patch level or anything else may follow.
  long key = driverKey(version);
  if (key < 0) return -1;
  int found = 0;
  for (int i = 0; i < kProfileCount; i++) {
    if (kProfiles[i].firstDriver <= key) found = i;
  }
  return found;
}

int cudaDriverVersionFor(const char* version) {
  long key = driverKey(version);
  if (key < 0) return 0;
  int found = kCudaBranches[0].cudaDriverVersion;
  for (const CudaBranch& branch : kCudaBranches) {
    if (branch.firstDriver <= key) found = branch.cudaDriverVersion;
  }
  return found;
}

bool driverHasRecoveryActionField(const char* version) {
  constexpr long kFirstDriverWithRecoveryAction = 570000;  // NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: R570's nvml.h
  long key = driverKey(version);
  return key < 0 || key >= kFirstDriverWithRecoveryAction;
}

int v3EntryBytes(int profile) { return profile >= 0 && profile < kProfileCount && kProfiles[profile].v3EntryBytes != 0 ? kProfiles[profile].v3EntryBytes : 24; }

}  // namespace gpugate_sim
