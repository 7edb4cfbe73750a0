// The helper's command line as its state (see process_title.h).
#include "process_title.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

namespace gpugate {

namespace {

char* area = nullptr;
size_t areaSize = 0;

}  // namespace

bool TakeProcessTitle(int argc, char** argv) {
  if (argc < 1 || argv[0] == nullptr) return false;
  char* end = argv[0] + strlen(argv[0]) + 1;
  for (int i = 1; i < argc; ++i) {
    if (argv[i] != end) return false;  // not the kernel's contiguous block
    end = argv[i] + strlen(argv[i]) + 1;
  }
  area = argv[0];
  areaSize = static_cast<size_t>(end - argv[0]);
  if (areaSize < 2) return false;
  memset(area, 0, areaSize);
  area[areaSize - 1] = ' ';  // non-zero: the kernel reads up to the first NUL (setproctitle)
  return true;
}

void SetProcessTitle(const char* text) {
  if (area == nullptr) return;
  size_t length = strlen(text);
  if (length > areaSize - 2) length = areaSize - 2;
  memcpy(area, text, length);
  area[length] = '\0';
}

void ShowCallInTitle(const char* symbol, int device) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const long long unixMs = static_cast<long long>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
  char text[256];
  char where[16] = "-";
  if (device >= 0) snprintf(where, sizeof where, "%d", device);
  snprintf(text, sizeof text, "gpugate-nvml-helper in %s gpu %s since %lld", symbol, where, unixMs);
  SetProcessTitle(text);
}

void ShowIdleInTitle() { SetProcessTitle("gpugate-nvml-helper idle"); }

}  // namespace gpugate
