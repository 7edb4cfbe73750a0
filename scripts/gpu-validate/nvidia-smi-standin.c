/*
 * gpugate's one stand-in for `nvidia-smi`, for hosts without a driver: the benchmark's
 * "nvidia-smi per poll" contender, the CLI tests' nvidia-smi on PATH, and `gpu-validate.sh
 * --simulate` (which compiles it with cc into its scratch folder).
 *
 * Like nvidia-smi, one run is a fresh process that loads the NVML library, initialises it, reads,
 * prints CSV and exits, so a poll through it costs what an nvidia-smi style poll costs a shell
 * script or an execFile caller. It loads $GPUGATE_NVML_LIBRARY when set (gpugate's simulator),
 * else libnvidia-ml.so.1, through the documented NVML C ABI (native/nvml_abi.h).
 *
 * It answers only the read-only queries gpugate's tools make, formatted as nvidia-smi formats
 * them:
 *   --query-gpu=index,uuid,pci.bus_id,name,memory.total,memory.used,memory.reserved,memory.free
 *   --query-compute-apps=gpu_uuid,pid,used_memory
 *   --format=csv[,noheader][,nounits]
 * An unknown field is refused as nvidia-smi refuses it, anything else is a usage error (exit 2);
 * it only ever calls NVML getters, so it can change nothing.
 *
 * Build: cc -O2 -I native -o nvidia-smi scripts/gpu-validate/nvidia-smi-standin.c -ldl
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_abi.h"

#define MIB (1024ull * 1024ull)
#define MAX_FIELDS 16
#define MAX_GPUS 64
#define NOT_AVAILABLE 0xFFFFFFFFFFFFFFFFull

/* What a field prints: a text value, or a byte count shown in MiB. */
enum value_kind { TEXT, BYTES };

/* One queryable field: its names on the command line, its CSV header, what it reads. */
struct field {
  const char *name;
  const char *header;
  enum value_kind kind;
  int slot; /* index into a row's values (struct gpu_row / struct app_row order below) */
};

/* A GPU's row: text slots 0-3, byte slots 4-7. */
enum { G_INDEX, G_UUID, G_BUS_ID, G_NAME, G_TOTAL, G_USED, G_RESERVED, G_FREE, G_SLOTS };
static const struct field GPU_FIELDS[] = {
    {"index", "index", TEXT, G_INDEX},
    {"uuid", "uuid", TEXT, G_UUID},
    {"gpu_uuid", "uuid", TEXT, G_UUID},
    {"pci.bus_id", "pci.bus_id", TEXT, G_BUS_ID},
    {"gpu_bus_id", "pci.bus_id", TEXT, G_BUS_ID},
    {"name", "name", TEXT, G_NAME},
    {"gpu_name", "name", TEXT, G_NAME},
    {"memory.total", "memory.total [MiB]", BYTES, G_TOTAL},
    {"memory.used", "memory.used [MiB]", BYTES, G_USED},
    {"memory.reserved", "memory.reserved [MiB]", BYTES, G_RESERVED},
    {"memory.free", "memory.free [MiB]", BYTES, G_FREE},
};

/* A compute application's row. */
enum { A_GPU_UUID, A_PID, A_USED, A_SLOTS };
static const struct field APP_FIELDS[] = {
    {"gpu_uuid", "gpu_uuid", TEXT, A_GPU_UUID},
    {"pid", "pid", TEXT, A_PID},
    {"used_memory", "used_gpu_memory [MiB]", BYTES, A_USED},
    {"used_gpu_memory", "used_gpu_memory [MiB]", BYTES, A_USED},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

struct row {
  char text[G_SLOTS][96];
  unsigned long long bytes[G_SLOTS];
};

struct nvml {
  const char *path;
  nvmlErrorString_fn error_string;
  nvmlDeviceGetCount_fn count;
  nvmlDeviceGetHandleByIndex_fn handle;
  nvmlDeviceGetPciInfo_fn pci;
  nvmlDeviceGetString_fn uuid;
  nvmlDeviceGetString_fn name;
  nvmlDeviceGetMemoryInfo_v2_fn memory;
  nvmlDeviceGetProcesses_fn compute_apps;
};

static int usage(const char *why) {
  fprintf(stderr,
          "nvidia-smi (gpugate stand-in): %s\n"
          "usage: nvidia-smi --query-gpu=FIELD[,FIELD...] | --query-compute-apps=FIELD[,FIELD...] "
          "--format=csv[,noheader][,nounits]\n",
          why);
  return 2;
}

/* nvidia-smi's exit codes: 9 when NVML cannot be used at all, 15 when a read fails. */
static int nvml_failure(const struct nvml *nvml, const char *fn, nvmlReturn_t code, int exit_code) {
  const char *text = nvml->error_string != NULL ? nvml->error_string(code) : NULL;
  fprintf(stderr, "nvidia-smi (gpugate stand-in): %s failed: %s (%d)\n", fn, text != NULL ? text : "unknown error", (int)code);
  return exit_code;
}

/* Parses "a,b,c" against `table` into `out`; 0, or 2 after naming the field nvidia-smi would refuse. */
static int parse_fields(const char *list, const struct field *table, size_t table_size, const struct field **out, int *count) {
  char copy[512];
  if (strlen(list) >= sizeof copy) return usage("field list too long");
  strcpy(copy, list);
  *count = 0;
  for (char *save = NULL, *item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
    while (*item == ' ') item++;
    size_t length = strlen(item);
    while (length > 0 && item[length - 1] == ' ') item[--length] = '\0';
    if (length == 0) continue;
    const struct field *found = NULL;
    for (size_t i = 0; i < table_size && found == NULL; i++) {
      if (strcmp(table[i].name, item) == 0) found = &table[i];
    }
    if (found == NULL) {
      fprintf(stderr, "Field \"%s\" is not a valid field to query.\n\n", item);
      return 2;
    }
    if (*count == MAX_FIELDS) return usage("too many fields");
    out[(*count)++] = found;
  }
  return *count > 0 ? 0 : usage("an empty field list");
}

static void print_rows(const struct row *rows, size_t count, const struct field **fields, int field_count, int header, int units) {
  if (header) {
    for (int f = 0; f < field_count; f++) printf("%s%s", f > 0 ? ", " : "", fields[f]->header);
    fputc('\n', stdout);
  }
  for (size_t r = 0; r < count; r++) {
    for (int f = 0; f < field_count; f++) {
      if (f > 0) fputs(", ", stdout);
      if (fields[f]->kind == TEXT) {
        fputs(rows[r].text[fields[f]->slot], stdout);
      } else if (rows[r].bytes[fields[f]->slot] == NOT_AVAILABLE) {
        fputs("[N/A]", stdout);
      } else {
        printf(units ? "%llu MiB" : "%llu", rows[r].bytes[fields[f]->slot] / MIB);
      }
    }
    fputc('\n', stdout);
  }
}

/* Reads every GPU into `gpus` (handles into `handles`); 0, or nvidia-smi's exit code. */
static int read_gpus(const struct nvml *nvml, struct row *gpus, nvmlDevice_t *handles, unsigned *count, int need_identity) {
  nvmlReturn_t rc = nvml->count(count);
  if (rc != NVML_SUCCESS) return nvml_failure(nvml, "nvmlDeviceGetCount_v2", rc, 15);
  if (*count > MAX_GPUS) *count = MAX_GPUS;
  for (unsigned d = 0; d < *count; d++) {
    struct row *gpu = &gpus[d];
    memset(gpu, 0, sizeof *gpu);
    snprintf(gpu->text[G_INDEX], sizeof gpu->text[G_INDEX], "%u", d);
    rc = nvml->handle(d, &handles[d]);
    if (rc != NVML_SUCCESS) return nvml_failure(nvml, "nvmlDeviceGetHandleByIndex_v2", rc, 15);
    nvmlMemory_v2_t memory;
    memset(&memory, 0, sizeof memory);
    memory.version = GPUGATE_NVML_MEMORY_V2_VERSION;
    rc = nvml->memory(handles[d], &memory);
    if (rc != NVML_SUCCESS) return nvml_failure(nvml, "nvmlDeviceGetMemoryInfo_v2", rc, 15);
    gpu->bytes[G_TOTAL] = memory.total;
    gpu->bytes[G_USED] = memory.used;
    gpu->bytes[G_RESERVED] = memory.reserved;
    gpu->bytes[G_FREE] = memory.free;
    if (!need_identity) continue;
    nvmlPciInfo_t pci;
    memset(&pci, 0, sizeof pci);
    if ((rc = nvml->pci(handles[d], &pci)) != NVML_SUCCESS) return nvml_failure(nvml, "nvmlDeviceGetPciInfo_v3", rc, 15);
    snprintf(gpu->text[G_BUS_ID], sizeof gpu->text[G_BUS_ID], "%.*s", (int)sizeof pci.busId, pci.busId);
    if ((rc = nvml->uuid(handles[d], gpu->text[G_UUID], sizeof gpu->text[G_UUID])) != NVML_SUCCESS) return nvml_failure(nvml, "nvmlDeviceGetUUID", rc, 15);
    if ((rc = nvml->name(handles[d], gpu->text[G_NAME], sizeof gpu->text[G_NAME])) != NVML_SUCCESS) return nvml_failure(nvml, "nvmlDeviceGetName", rc, 15);
  }
  return 0;
}

/* Appends one GPU's compute applications to `apps` (count-then-fill, with headroom and retries). */
static int read_apps(const struct nvml *nvml, nvmlDevice_t handle, const char *uuid, struct row *apps, size_t *count, size_t capacity) {
  for (int attempt = 0; attempt < 5; attempt++) {
    unsigned size = 0;
    nvmlReturn_t rc = nvml->compute_apps(handle, &size, NULL);
    if (rc == NVML_SUCCESS) return 0;
    if (rc != NVML_ERROR_INSUFFICIENT_SIZE) return nvml_failure(nvml, "nvmlDeviceGetComputeRunningProcesses_v3", rc, 15);
    unsigned room = size + 4;
    nvmlProcessInfo_v2_t *infos = calloc(room, sizeof *infos);
    if (infos == NULL) return nvml_failure(nvml, "calloc", NVML_ERROR_MEMORY, 15);
    size = room;
    rc = nvml->compute_apps(handle, &size, infos);
    if (rc == NVML_SUCCESS) {
      for (unsigned i = 0; i < size && *count < capacity; i++) {
        struct row *app = &apps[(*count)++];
        memset(app, 0, sizeof *app);
        snprintf(app->text[A_GPU_UUID], sizeof app->text[A_GPU_UUID], "%s", uuid);
        snprintf(app->text[A_PID], sizeof app->text[A_PID], "%u", infos[i].pid);
        app->bytes[A_USED] = infos[i].usedGpuMemory;
      }
    }
    free(infos);
    if (rc == NVML_SUCCESS) return 0;
    if (rc != NVML_ERROR_INSUFFICIENT_SIZE) return nvml_failure(nvml, "nvmlDeviceGetComputeRunningProcesses_v3", rc, 15);
  }
  return nvml_failure(nvml, "nvmlDeviceGetComputeRunningProcesses_v3", NVML_ERROR_INSUFFICIENT_SIZE, 15);
}

int main(int argc, char **argv) {
  const struct field *fields[MAX_FIELDS];
  int field_count = 0, apps = 0, csv = 0, header = 1, units = 1;
  for (int i = 1; i < argc; i++) {
    int rc = 0;
    if (strncmp(argv[i], "--query-gpu=", 12) == 0) {
      apps = 0;
      rc = parse_fields(argv[i] + 12, GPU_FIELDS, COUNT(GPU_FIELDS), fields, &field_count);
    } else if (strncmp(argv[i], "--query-compute-apps=", 21) == 0) {
      apps = 1;
      rc = parse_fields(argv[i] + 21, APP_FIELDS, COUNT(APP_FIELDS), fields, &field_count);
    } else if (strncmp(argv[i], "--format=", 9) == 0) {
      char copy[64];
      if (strlen(argv[i] + 9) >= sizeof copy) return usage("unsupported --format");
      strcpy(copy, argv[i] + 9);
      for (char *save = NULL, *item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        if (strcmp(item, "csv") == 0) csv = 1;
        else if (strcmp(item, "noheader") == 0) header = 0;
        else if (strcmp(item, "nounits") == 0) units = 0;
        else return usage("unsupported --format (csv, noheader, nounits)");
      }
    } else {
      char why[256];
      snprintf(why, sizeof why, "unsupported argument '%.120s': this stand-in answers only --query-gpu / --query-compute-apps with --format=csv", argv[i]);
      return usage(why);
    }
    if (rc != 0) return rc;
  }
  if (field_count == 0 || !csv) return usage("expected --query-gpu=... or --query-compute-apps=... and --format=csv");

  struct nvml nvml;
  memset(&nvml, 0, sizeof nvml);
  nvml.path = getenv("GPUGATE_NVML_LIBRARY");
  if (nvml.path == NULL || *nvml.path == '\0') nvml.path = "libnvidia-ml.so.1";
  void *lib = dlopen(nvml.path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver (%s)\n", dlerror());
    return 9;
  }
  nvmlInit_fn init = (nvmlInit_fn)dlsym(lib, "nvmlInit_v2");
  nvmlShutdown_fn shutdown = (nvmlShutdown_fn)dlsym(lib, "nvmlShutdown");
  nvml.error_string = (nvmlErrorString_fn)dlsym(lib, "nvmlErrorString");
  nvml.count = (nvmlDeviceGetCount_fn)dlsym(lib, "nvmlDeviceGetCount_v2");
  nvml.handle = (nvmlDeviceGetHandleByIndex_fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
  nvml.pci = (nvmlDeviceGetPciInfo_fn)dlsym(lib, "nvmlDeviceGetPciInfo_v3");
  nvml.uuid = (nvmlDeviceGetString_fn)dlsym(lib, "nvmlDeviceGetUUID");
  nvml.name = (nvmlDeviceGetString_fn)dlsym(lib, "nvmlDeviceGetName");
  nvml.memory = (nvmlDeviceGetMemoryInfo_v2_fn)dlsym(lib, "nvmlDeviceGetMemoryInfo_v2");
  nvml.compute_apps = (nvmlDeviceGetProcesses_fn)dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (!init || !shutdown || !nvml.count || !nvml.handle || !nvml.pci || !nvml.uuid || !nvml.name || !nvml.memory || !nvml.compute_apps) {
    fprintf(stderr, "nvidia-smi (gpugate stand-in): %s lacks a required NVML symbol\n", nvml.path);
    return 9;
  }
  nvmlReturn_t rc = init();
  if (rc != NVML_SUCCESS) return nvml_failure(&nvml, "nvmlInit_v2", rc, 9);

  static struct row gpus[MAX_GPUS];
  static struct row app_rows[4096];
  nvmlDevice_t handles[MAX_GPUS];
  unsigned gpu_count = 0;
  int need_identity = apps;
  for (int f = 0; f < field_count; f++) need_identity |= fields[f]->kind == TEXT && fields[f]->slot != G_INDEX;
  int status = read_gpus(&nvml, gpus, handles, &gpu_count, need_identity);
  if (status == 0 && !apps) {
    print_rows(gpus, gpu_count, fields, field_count, header, units);
  } else if (status == 0) {
    size_t app_count = 0;
    for (unsigned d = 0; d < gpu_count && status == 0; d++) {
      status = read_apps(&nvml, handles[d], gpus[d].text[G_UUID], app_rows, &app_count, COUNT(app_rows));
    }
    if (status == 0) print_rows(app_rows, app_count, fields, field_count, header, units);
  }
  shutdown();
  return status;
}
