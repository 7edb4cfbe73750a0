/*
 * The C floor of the poll-latency benchmark.
 *
 * Responsible for one thing: measuring what the NVML calls of one poll cost when made straight
 * from C, with nothing between the caller and the library. It dlopens the library named on the
 * command line (the simulator in the benchmark, or a real libnvidia-ml.so.1), initialises NVML
 * once, takes the device handles once, and then loops the same calls gpugate makes per poll:
 * nvmlDeviceGetMemoryInfo_v2 for every device ("memory" mode), plus the compute, graphics and
 * MPS process lists of every device ("processes" mode; one call per list into a preallocated
 * buffer, the cheapest way NVML allows). Whatever gpugate adds above these numbers is its own
 * overhead.
 *
 * Timing: samples are batches of B polls (B calibrated so a batch lasts about TARGET_BATCH_NS),
 * each batch timed with CLOCK_MONOTONIC and divided by B; the median / p99 / max of those
 * per-poll times are printed as one JSON object on stdout. It also prints memoryReadNs: the
 * cost of one memory read on one handle (the median of 100 tight loops of 10 000 calls): the
 * library's own cost per read, which the benchmark requires to be <= 100 ns on the simulator.
 *
 * Usage: floor LIBRARY memory|processes SAMPLES [TARGET_BATCH_NS]
 * Read-only: it never changes a GPU setting.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvml_abi.h"

#define MAX_DEVICES 64
#define PROCESS_CAPACITY 256
#define PROCESS_ENTRY_MAX_BYTES 32

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *need_symbol(void *lib, const char *name) {
  void *fn = dlsym(lib, name);
  if (fn == NULL) {
    fprintf(stderr, "floor: the library does not export %s\n", name);
    exit(3);
  }
  return fn;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a;
  double y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array. */
static double percentile(const double *sorted, long n, double p) {
  long rank = (long)(p * (double)n + 0.999999);
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  return sorted[rank - 1];
}

static nvmlDeviceGetMemoryInfo_v2_fn get_memory;
static nvmlDeviceGetProcesses_fn get_lists[3];
static nvmlDevice_t handles[MAX_DEVICES];
static unsigned int device_count;
static int with_processes;
static unsigned char process_buffer[PROCESS_CAPACITY * PROCESS_ENTRY_MAX_BYTES];
static volatile unsigned long long sink;

/* One poll: what gpugate reads per snapshot. Returns non-zero on an NVML error. */
static int poll_once(void) {
  for (unsigned int d = 0; d < device_count; d++) {
    nvmlMemory_v2_t memory;
    memory.version = GPUGATE_NVML_MEMORY_V2_VERSION;
    nvmlReturn_t rc = get_memory(handles[d], &memory);
    if (rc != NVML_SUCCESS) return (int)rc;
    sink += memory.used;
    if (!with_processes) continue;
    for (int k = 0; k < 3; k++) {
      unsigned int count = PROCESS_CAPACITY;
      rc = get_lists[k](handles[d], &count, process_buffer);
      if (rc != NVML_SUCCESS) return (int)rc;
      sink += count;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4 || (strcmp(argv[2], "memory") != 0 && strcmp(argv[2], "processes") != 0)) {
    fprintf(stderr, "usage: floor LIBRARY memory|processes SAMPLES [TARGET_BATCH_NS]\n");
    return 2;
  }
  const char *library = argv[1];
  with_processes = strcmp(argv[2], "processes") == 0;
  long samples = strtol(argv[3], NULL, 10);
  double target_batch_ns = argc > 4 ? strtod(argv[4], NULL) : 20000.0;
  if (samples < 1 || samples > 10000000 || !(target_batch_ns > 0)) {
    fprintf(stderr, "floor: SAMPLES must be 1..10000000 and TARGET_BATCH_NS > 0, got %s %s\n",
            argv[3], argc > 4 ? argv[4] : "(default)");
    return 2;
  }

  void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "floor: cannot load %s: %s\n", library, dlerror());
    return 3;
  }
  nvmlInit_fn init = (nvmlInit_fn)need_symbol(lib, "nvmlInit_v2");
  nvmlShutdown_fn shutdown = (nvmlShutdown_fn)need_symbol(lib, "nvmlShutdown");
  nvmlDeviceGetCount_fn get_count = (nvmlDeviceGetCount_fn)need_symbol(lib, "nvmlDeviceGetCount_v2");
  nvmlDeviceGetHandleByIndex_fn get_handle =
      (nvmlDeviceGetHandleByIndex_fn)need_symbol(lib, "nvmlDeviceGetHandleByIndex_v2");
  get_memory = (nvmlDeviceGetMemoryInfo_v2_fn)need_symbol(lib, "nvmlDeviceGetMemoryInfo_v2");
  get_lists[0] = (nvmlDeviceGetProcesses_fn)need_symbol(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
  get_lists[1] = (nvmlDeviceGetProcesses_fn)need_symbol(lib, "nvmlDeviceGetGraphicsRunningProcesses_v3");
  get_lists[2] = (nvmlDeviceGetProcesses_fn)need_symbol(lib, "nvmlDeviceGetMPSComputeRunningProcesses_v3");

  nvmlReturn_t rc = init();
  if (rc != NVML_SUCCESS) {
    fprintf(stderr, "floor: nvmlInit_v2 returned %d\n", rc);
    return 4;
  }
  rc = get_count(&device_count);
  if (rc != NVML_SUCCESS || device_count == 0 || device_count > MAX_DEVICES) {
    fprintf(stderr, "floor: nvmlDeviceGetCount_v2 returned %d with %u devices (need 1..%d)\n", rc,
            device_count, MAX_DEVICES);
    return 4;
  }
  for (unsigned int d = 0; d < device_count; d++) {
    rc = get_handle(d, &handles[d]);
    if (rc != NVML_SUCCESS) {
      fprintf(stderr, "floor: nvmlDeviceGetHandleByIndex_v2(%u) returned %d\n", d, rc);
      return 4;
    }
  }

  /* Warm-up, and a check that every call of a poll succeeds. */
  for (int i = 0; i < 1000; i++) {
    int err = poll_once();
    if (err != 0) {
      fprintf(stderr, "floor: an NVML call of the poll returned %d\n", err);
      return 4;
    }
  }

  /* The library's own cost per memory read: one handle, 100 tight loops of 10 000 reads; the
     median loop (a preempted loop lands in the tail, not in the median). */
  enum { READ_LOOPS = 100, READS_PER_LOOP = 10000 };
  double read_loops[READ_LOOPS];
  for (int loop = 0; loop < READ_LOOPS; loop++) {
    double t0 = now_ns();
    for (int i = 0; i < READS_PER_LOOP; i++) {
      nvmlMemory_v2_t memory;
      memory.version = GPUGATE_NVML_MEMORY_V2_VERSION;
      get_memory(handles[0], &memory);
      sink += memory.used;
    }
    read_loops[loop] = (now_ns() - t0) / (double)READS_PER_LOOP;
  }
  qsort(read_loops, READ_LOOPS, sizeof(double), compare_doubles);
  double memory_read_ns = percentile(read_loops, READ_LOOPS, 0.5);

  /* Calibrate the batch size. */
  long batch = 1;
  for (;;) {
    double start = now_ns();
    for (long i = 0; i < batch; i++) poll_once();
    double elapsed = now_ns() - start;
    if (elapsed >= target_batch_ns || batch >= (1L << 24)) break;
    batch *= 2;
  }

  double *per_poll = malloc(sizeof(double) * (size_t)samples);
  if (per_poll == NULL) {
    fprintf(stderr, "floor: out of memory for %ld samples\n", samples);
    return 5;
  }
  double total = 0;
  for (long s = 0; s < samples; s++) {
    double start = now_ns();
    for (long i = 0; i < batch; i++) poll_once();
    per_poll[s] = (now_ns() - start) / (double)batch;
    total += per_poll[s];
  }
  qsort(per_poll, (size_t)samples, sizeof(double), compare_doubles);

  printf("{\"mode\":\"%s\",\"devices\":%u,\"samples\":%ld,\"batch\":%ld,"
         "\"perSnapshotNs\":{\"median\":%.3f,\"p99\":%.3f,\"max\":%.3f,\"mean\":%.3f},"
         "\"memoryReadNs\":%.3f}\n",
         with_processes ? "processes" : "memory", device_count, samples, batch,
         percentile(per_poll, samples, 0.5), percentile(per_poll, samples, 0.99),
         per_poll[samples - 1], total / (double)samples, memory_read_ns);
  free(per_poll);
  shutdown();
  return 0;
}
