/*
 * A stand-in for `nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits`.
 *
 * Responsible for imitating, on a machine without a driver, what one nvidia-smi style poll costs
 * a shell script or an execFile caller: a fresh process that loads the NVML library, initialises
 * it, reads each GPU's memory, prints one CSV line per GPU (MiB, no header, no units) and exits.
 * It loads the same library as the rest of the benchmark: $GPUGATE_NVML_LIBRARY when set, else
 * libnvidia-ml.so.1. Only the query fields memory.used, memory.free, memory.total and index are
 * understood (comma separated, as nvidia-smi takes them); anything else is a usage error
 * (exit 2). Read-only: it never changes a GPU setting.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_abi.h"

enum field { FIELD_USED, FIELD_FREE, FIELD_TOTAL, FIELD_INDEX };

#define MAX_FIELDS 8

static int usage(const char *why) {
  fprintf(stderr,
          "nvidia-smi (gpugate stand-in): %s\n"
          "usage: nvidia-smi --query-gpu=memory.used[,memory.free,memory.total,index] "
          "--format=csv,noheader,nounits\n",
          why);
  return 2;
}

static int parse_fields(const char *list, enum field *fields, int *count) {
  char copy[256];
  if (strlen(list) >= sizeof copy) return -1;
  strcpy(copy, list);
  *count = 0;
  for (char *save = NULL, *item = strtok_r(copy, ",", &save); item != NULL;
       item = strtok_r(NULL, ",", &save)) {
    if (*count == MAX_FIELDS) return -1;
    if (strcmp(item, "memory.used") == 0) fields[(*count)++] = FIELD_USED;
    else if (strcmp(item, "memory.free") == 0) fields[(*count)++] = FIELD_FREE;
    else if (strcmp(item, "memory.total") == 0) fields[(*count)++] = FIELD_TOTAL;
    else if (strcmp(item, "index") == 0) fields[(*count)++] = FIELD_INDEX;
    else return -1;
  }
  return *count > 0 ? 0 : -1;
}

int main(int argc, char **argv) {
  enum field fields[MAX_FIELDS];
  int field_count = 0;
  int have_format = 0;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--query-gpu=", 12) == 0) {
      if (parse_fields(argv[i] + 12, fields, &field_count) != 0) {
        return usage("unsupported --query-gpu field list");
      }
    } else if (strcmp(argv[i], "--format=csv,noheader,nounits") == 0) {
      have_format = 1;
    } else {
      return usage("unsupported argument");
    }
  }
  if (field_count == 0 || !have_format) return usage("both --query-gpu and --format are required");

  const char *library = getenv("GPUGATE_NVML_LIBRARY");
  if (library == NULL || *library == '\0') library = "libnvidia-ml.so.1";
  void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver "
                    "(%s)\n", dlerror());
    return 9;
  }
  nvmlInit_fn init = (nvmlInit_fn)dlsym(lib, "nvmlInit_v2");
  nvmlShutdown_fn shutdown = (nvmlShutdown_fn)dlsym(lib, "nvmlShutdown");
  nvmlDeviceGetCount_fn get_count = (nvmlDeviceGetCount_fn)dlsym(lib, "nvmlDeviceGetCount_v2");
  nvmlDeviceGetHandleByIndex_fn get_handle =
      (nvmlDeviceGetHandleByIndex_fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
  nvmlDeviceGetMemoryInfo_v2_fn get_memory =
      (nvmlDeviceGetMemoryInfo_v2_fn)dlsym(lib, "nvmlDeviceGetMemoryInfo_v2");
  if (!init || !shutdown || !get_count || !get_handle || !get_memory) {
    fprintf(stderr, "nvidia-smi (gpugate stand-in): %s lacks a required NVML symbol\n", library);
    return 9;
  }
  nvmlReturn_t rc = init();
  if (rc != NVML_SUCCESS) {
    fprintf(stderr, "Failed to initialize NVML: error %d\n", rc);
    return 9;
  }
  unsigned int count = 0;
  rc = get_count(&count);
  if (rc != NVML_SUCCESS) {
    fprintf(stderr, "Unable to count GPUs: error %d\n", rc);
    shutdown();
    return 15;
  }
  int status = 0;
  for (unsigned int d = 0; d < count; d++) {
    nvmlDevice_t handle;
    nvmlMemory_v2_t memory;
    memory.version = GPUGATE_NVML_MEMORY_V2_VERSION;
    rc = get_handle(d, &handle);
    if (rc == NVML_SUCCESS) rc = get_memory(handle, &memory);
    for (int f = 0; f < field_count; f++) {
      if (f > 0) fputs(", ", stdout);
      if (fields[f] == FIELD_INDEX) {
        printf("%u", d);
      } else if (rc != NVML_SUCCESS) {
        fputs("[Unknown Error]", stdout);
        status = 15;
      } else {
        unsigned long long bytes = fields[f] == FIELD_USED   ? memory.used
                                   : fields[f] == FIELD_FREE ? memory.free
                                                             : memory.total;
        printf("%llu", bytes / (1024ull * 1024ull));
      }
    }
    fputc('\n', stdout);
  }
  shutdown();
  return status;
}
