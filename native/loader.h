// Finding and dlopen-ing the NVML library.
//
// Order: an explicit path (from the caller: the libraryPath option or GPUGATE_NVML_LIBRARY,
// resolved in TypeScript) and nothing else when one is given; otherwise the soname
// libnvidia-ml.so.1 through the dynamic linker's own search, then the driver directories
// distributions and container runtimes use. A CUDA toolkit's stubs/ copy is never tried (it
// loads and then fails every call). Every dlerror() text is kept, with the place tried, so a
// failure can list them all; on success the path that really loaded is recorded.
#pragma once

#include <string>
#include <vector>

namespace gpugate {

struct LoadAttempt {
  std::string candidate;
  std::string error;  // dlerror() text
};

struct LoadedLibrary {
  void* handle = nullptr;
  std::string path;                   // the file that loaded (absolute when the linker tells us)
  std::vector<LoadAttempt> attempts;  // every candidate that failed, in order
};

// The candidates tried when no explicit path is given, in order.
std::vector<std::string> DefaultLibraryCandidates();

// Tries the candidates; returns true with out->handle set, or false with out->attempts filled.
bool LoadNvmlLibrary(const std::string& explicitPath, LoadedLibrary* out);

}  // namespace gpugate
