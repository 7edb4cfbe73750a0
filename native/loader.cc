// Finding and dlopen-ing the NVML library (see loader.h for the order and the rules).
#include "loader.h"

#include <dlfcn.h>
#include <link.h>

namespace gpugate {

namespace {

constexpr const char* kSoname = "libnvidia-ml.so.1";

constexpr const char* kDriverDirectories[] = {
    "/usr/lib/x86_64-linux-gnu",  // Debian, Ubuntu
    "/usr/lib64",                 // RHEL, SUSE
    "/usr/local/nvidia/lib64",    // containers (device plugin / toolkit mounts)
    "/usr/lib/wsl/lib",           // WSL
    "/usr/lib/aarch64-linux-gnu",  // Arm Debian, Ubuntu
    "/usr/local/nvidia/lib",
};

std::string ResolvedPath(void* handle, const std::string& fallback) {
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    return map->l_name;
  }
  return fallback;
}

bool TryOne(const std::string& candidate, LoadedLibrary* out) {
  dlerror();  // clear a stale error
  void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* text = dlerror();
    out->attempts.push_back({candidate, text != nullptr ? text : "dlopen failed without a dlerror() text"});
    return false;
  }
  out->handle = handle;
  out->path = ResolvedPath(handle, candidate);
  return true;
}

}  // namespace

std::vector<std::string> DefaultLibraryCandidates() {
  std::vector<std::string> candidates{kSoname};
  for (const char* directory : kDriverDirectories) {
    candidates.push_back(std::string(directory) + "/" + kSoname);
  }
  return candidates;
}

bool LoadNvmlLibrary(const std::string& explicitPath, LoadedLibrary* out) {
  if (!explicitPath.empty()) return TryOne(explicitPath, out);
  for (const std::string& candidate : DefaultLibraryCandidates()) {
    if (TryOne(candidate, out)) return true;
  }
  return false;
}

}  // namespace gpugate
