/*
 * A small, independent NVML client used to check gpugate's simulator from the outside.
 *
 * It declares the few NVML types it needs itself (from NVML's documented C ABI, not from
 * gpugate's header), loads the library with dlopen (a path given with --lib, else the name
 * libnvidia-ml.so.1 through the normal search path), and prints what it reads:
 *
 *   nvml_client [--lib PATH] [--v1] [--repeat N] [--no-shutdown] [--then SCENARIO] dump
 *                                                        devices, memory and processes as JSON
 *                                                         (--then: shut down, point
 *                                                         GPUGATE_SIM_SCENARIO at SCENARIO, dump again)
 *                                                         (memory _v2 and processes _v3; --v1 uses
 *                                                         the plain oldest symbols instead)
 *   nvml_client [--lib PATH] probe                       one line per protocol probe: "name rc ..."
 *   nvml_client [--lib PATH] symbols NAME...             "NAME present|absent" per dlsym lookup
 *   nvml_client [--lib PATH] stubs NAME...               "NAME before=RC after=RC": each function called
 *                                                         with no argument before init and after it
 *                                                         (only for functions that read no argument)
 *   nvml_client [--lib PATH] utilization INDEX           "utilization RC GPU MEMORY" for GPU INDEX
 *   nvml_client [--lib PATH] versions                    driver, NVML and CUDA versions, one per line
 *   nvml_client [--lib PATH] rawprocs INDEX [SYMBOL]     count and bytes written by the _v3 list
 *                                                         (or the process-list SYMBOL given)
 *   nvml_client [--lib PATH] procs24 INDEX               the _v3 list read as 24-byte entries, as a
 *                                                         reader written before 535.43 reads it
 *   nvml_client [--lib PATH] detect INDEX                the _v3 list read with the entry size told
 *                                                         by the exports (ConfCompute without DetailList: 32)
 *   nvml_client [--lib PATH] telemetry INDEX             one line per monitoring query: "name rc values..."
 *   nvml_client [--lib PATH] migextra INDEX              MIG slot count, per slot: is-MIG flag, BAR1 and
 *                                                         process count; the parent's combined _v3 list
 *   nvml_client [--lib PATH] interactive                 reads "mem I" / "procs I" / "state" / "quit" lines
 *                                                         (state: every GPU's used bytes and process count)
 *   nvml_client [--lib PATH] bench N                     ns per nvmlDeviceGetMemoryInfo_v2 call
 *   nvml_client [--lib PATH] threads I                   a second thread reads device I's memory
 *                                                         while the main thread reads device 0's
 *
 * Exit status: 0 when the command ran, 3 when init failed (the rc and the simulator's last
 * error are printed on stdout), 2 for usage errors.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int rc_t;
typedef void *dev_t_;

typedef struct { unsigned long long total, free, used; } mem_v1;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } mem_v2;
typedef struct { unsigned int pid; unsigned long long used; } proc_v1;
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } proc_v2;
typedef struct {
  char legacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} pci_info;

#define MEM_V2_VERSION ((unsigned int)(sizeof(mem_v2) | (2u << 24)))

static void *lib;

static void *sym(const char *name) {
  void *p = dlsym(lib, name);
  if (p == NULL) {
    fprintf(stderr, "nvml_client: missing symbol %s\n", name);
    exit(4);
  }
  return p;
}

#define FN(type, name) ((type)sym(name))
typedef rc_t (*f_void)(void);
typedef rc_t (*f_uint)(unsigned int *);
typedef rc_t (*f_handle)(unsigned int, dev_t_ *);
typedef rc_t (*f_str)(dev_t_, char *, unsigned int);
typedef rc_t (*f_sysstr)(char *, unsigned int);
typedef rc_t (*f_devuint)(dev_t_, unsigned int *);
typedef rc_t (*f_mem1)(dev_t_, mem_v1 *);
typedef rc_t (*f_mem2)(dev_t_, mem_v2 *);
typedef rc_t (*f_procs)(dev_t_, unsigned int *, void *);
typedef rc_t (*f_pci)(dev_t_, pci_info *);
typedef rc_t (*f_cc)(dev_t_, int *, int *);
typedef rc_t (*f_temp)(dev_t_, int, unsigned int *);
typedef rc_t (*f_migh)(dev_t_, unsigned int, dev_t_ *);
typedef rc_t (*f_migmode)(dev_t_, unsigned int *, unsigned int *);
typedef const char *(*f_errstr)(rc_t);
typedef const char *(*f_lasterr)(void);

static int use_v1 = 0;
static int skip_shutdown = 0;
static const char *then_scenario = NULL;

static rc_t do_init(void) {
  rc_t rc = use_v1 ? FN(f_void, "nvmlInit")() : FN(f_void, "nvmlInit_v2")();
  if (rc != 0) {
    f_lasterr le = (f_lasterr)dlsym(lib, "gpugateSimLastError");
    printf("init-failed rc=%d lastError=%s\n", rc, le ? le() : "");
  }
  return rc;
}

static void print_json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') printf("\\%c", *s);
    else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
    else putchar(*s);
  }
  putchar('"');
}

static void print_processes(dev_t_ d) {
  proc_v2 p2[64];
  proc_v1 p1[64];
  unsigned int n = 64;
  rc_t rc = use_v1 ? FN(f_procs, "nvmlDeviceGetComputeRunningProcesses")(d, &n, p1)
                   : FN(f_procs, "nvmlDeviceGetComputeRunningProcesses_v3")(d, &n, p2);
  printf("\"processesRc\":%d,\"processes\":[", rc);
  for (unsigned int i = 0; rc == 0 && i < n; i++) {
    unsigned long long used = use_v1 ? p1[i].used : p2[i].used;
    printf("%s{\"pid\":%u,\"usedBytes\":", i ? "," : "", use_v1 ? p1[i].pid : p2[i].pid);
    if (used == 0xFFFFFFFFFFFFFFFFull) printf("null");
    else printf("%llu", used);
    if (!use_v1) printf(",\"gpuInstanceId\":%u,\"computeInstanceId\":%u", p2[i].gi, p2[i].ci);
    printf("}");
  }
  printf("]");
}

static int cmd_dump(int repeat) {
  if (do_init() != 0) return 3;
  for (int r = 0; r < repeat; r++) {
    char buf[96];
    unsigned int count = 0;
    rc_t rc = use_v1 ? FN(f_uint, "nvmlDeviceGetCount")(&count) : FN(f_uint, "nvmlDeviceGetCount_v2")(&count);
    printf("{\"countRc\":%d,\"count\":%u", rc, count);
    if (FN(f_sysstr, "nvmlSystemGetDriverVersion")(buf, sizeof buf) == 0) {
      printf(",\"driverVersion\":");
      print_json_string(buf);
    }
    printf(",\"devices\":[");
    for (unsigned int i = 0; i < count; i++) {
      dev_t_ d = NULL;
      rc = use_v1 ? FN(f_handle, "nvmlDeviceGetHandleByIndex")(i, &d) : FN(f_handle, "nvmlDeviceGetHandleByIndex_v2")(i, &d);
      printf("%s{\"index\":%u,\"handleRc\":%d", i ? "," : "", i, rc);
      if (rc == 0) {
        if (FN(f_str, "nvmlDeviceGetName")(d, buf, sizeof buf) == 0) {
          printf(",\"name\":");
          print_json_string(buf);
        }
        if (FN(f_str, "nvmlDeviceGetUUID")(d, buf, sizeof buf) == 0) {
          printf(",\"uuid\":");
          print_json_string(buf);
        }
        pci_info pci;
        memset(&pci, 0, sizeof pci);
        rc = use_v1 ? FN(f_pci, "nvmlDeviceGetPciInfo")(d, &pci) : FN(f_pci, "nvmlDeviceGetPciInfo_v3")(d, &pci);
        if (rc == 0) {
          printf(",\"pciBusId\":");
          print_json_string(use_v1 ? pci.legacy : pci.busId);
        }
        unsigned int minor;
        if (FN(f_devuint, "nvmlDeviceGetMinorNumber")(d, &minor) == 0) printf(",\"minorNumber\":%u", minor);
        int major, minorCc;
        if (FN(f_cc, "nvmlDeviceGetCudaComputeCapability")(d, &major, &minorCc) == 0) {
          printf(",\"computeCapability\":\"%d.%d\"", major, minorCc);
        }
        if (use_v1) {
          mem_v1 m;
          rc = FN(f_mem1, "nvmlDeviceGetMemoryInfo")(d, &m);
          printf(",\"memoryRc\":%d", rc);
          if (rc == 0) printf(",\"memory\":{\"totalBytes\":%llu,\"freeBytes\":%llu,\"usedBytes\":%llu}", m.total, m.free, m.used);
        } else {
          mem_v2 m;
          memset(&m, 0, sizeof m);
          m.version = MEM_V2_VERSION;
          rc = FN(f_mem2, "nvmlDeviceGetMemoryInfo_v2")(d, &m);
          printf(",\"memoryRc\":%d", rc);
          if (rc == 0) {
            printf(",\"memory\":{\"totalBytes\":%llu,\"reservedBytes\":%llu,\"freeBytes\":%llu,\"usedBytes\":%llu}",
                   m.total, m.reserved, m.free, m.used);
          }
        }
        printf(",");
        print_processes(d);
      }
      printf("}");
    }
    printf("]}\n");
  }
  if (!skip_shutdown) FN(f_void, "nvmlShutdown")();
  if (then_scenario != NULL) {
    /* A second session in the same process, reading another scenario. */
    setenv("GPUGATE_SIM_SCENARIO", then_scenario, 1);
    then_scenario = NULL;
    return cmd_dump(repeat);
  }
  return 0;
}

static int cmd_probe(void) {
  f_uint count_v2 = FN(f_uint, "nvmlDeviceGetCount_v2");
  f_handle handle = FN(f_handle, "nvmlDeviceGetHandleByIndex_v2");
  f_void init = FN(f_void, "nvmlInit_v2");
  f_void shut = FN(f_void, "nvmlShutdown");
  f_str name = FN(f_str, "nvmlDeviceGetName");
  f_str uuid = FN(f_str, "nvmlDeviceGetUUID");
  f_mem2 mem2 = FN(f_mem2, "nvmlDeviceGetMemoryInfo_v2");
  f_mem1 mem1 = FN(f_mem1, "nvmlDeviceGetMemoryInfo");
  f_procs procs = FN(f_procs, "nvmlDeviceGetComputeRunningProcesses_v3");
  f_errstr errstr = FN(f_errstr, "nvmlErrorString");
  unsigned int count = 12345;
  char buf[96];

  printf("count_before_init %d\n", count_v2(&count));
  printf("shutdown_before_init %d\n", shut());
  printf("init_first %d\n", init());
  printf("init_second %d\n", init());
  printf("shutdown_first %d\n", shut());
  rc_t rc = count_v2(&count);
  printf("count_after_one_shutdown %d %u\n", rc, count);
  dev_t_ d = NULL;
  printf("handle_bad_index %d\n", handle(count, &d));
  printf("handle_null_out %d\n", handle(0, NULL));
  printf("count_null %d\n", count_v2(NULL));
  rc = handle(0, &d);
  printf("handle_0 %d\n", rc);
  printf("name_null %d\n", name(d, NULL, sizeof buf));
  printf("name_short %d\n", name(d, buf, 4));
  rc = name(d, buf, sizeof buf);
  printf("name_full %d %s\n", rc, rc == 0 ? buf : "");
  printf("uuid_short %d\n", uuid(d, buf, 5));
  int local = 0;
  mem_v2 m;
  memset(&m, 0, sizeof m);
  m.version = MEM_V2_VERSION;
  printf("memory_bad_handle %d\n", mem2((dev_t_)&local, &m));
  printf("memory_null_handle %d\n", mem2(NULL, &m));
  printf("memory_null_out %d\n", mem2(d, NULL));
  m.version = (unsigned int)(sizeof(mem_v2) | (1u << 24));
  printf("memory_wrong_version %d\n", mem2(d, &m));
  m.version = MEM_V2_VERSION;
  rc = mem2(d, &m);
  printf("memory_v2 %d %llu %llu %llu %llu\n", rc, m.total, m.reserved, m.free, m.used);
  mem_v1 m1;
  rc = mem1(d, &m1);
  printf("memory_v1 %d %llu %llu %llu\n", rc, m1.total, m1.free, m1.used);

  unsigned int n = 0;
  rc = procs(d, &n, NULL);
  printf("procs_query %d %u\n", rc, n);
  unsigned int needed = n;
  proc_v2 list[64];
  if (needed > 1) {
    n = needed - 1;
    rc = procs(d, &n, list);
    printf("procs_too_small %d %u\n", rc, n);
  }
  n = needed + 2;
  rc = procs(d, &n, list);
  printf("procs_fill %d %u", rc, n);
  for (unsigned int i = 0; rc == 0 && i < n; i++) printf(" %u:%llu", list[i].pid, list[i].used);
  printf("\n");
  printf("procs_null_count %d\n", procs(d, NULL, list));
  n = 0;
  printf("procs_bad_handle %d\n", procs((dev_t_)&local, &n, NULL));

  if (needed > 0) {
    char pname[64];
    rc = ((rc_t(*)(unsigned int, char *, unsigned int))sym("nvmlSystemGetProcessName"))(list[0].pid, pname, sizeof pname);
    printf("process_name %d %s\n", rc, rc == 0 ? pname : "");
  }
  printf("process_name_unknown %d\n", ((rc_t(*)(unsigned int, char *, unsigned int))sym("nvmlSystemGetProcessName"))(1u, buf, sizeof buf));

  char id[96];
  dev_t_ other = NULL;
  typedef rc_t (*f_bystr)(const char *, dev_t_ *);
  if (uuid(d, id, sizeof id) == 0) {
    rc = FN(f_bystr, "nvmlDeviceGetHandleByUUID")(id, &other);
    printf("handle_by_uuid %d %s\n", rc, other == d ? "same" : "other");
  }
  printf("handle_by_uuid_unknown %d\n", FN(f_bystr, "nvmlDeviceGetHandleByUUID")("GPU-not-there", &other));
  pci_info pci;
  memset(&pci, 0, sizeof pci);
  if (FN(f_pci, "nvmlDeviceGetPciInfo_v3")(d, &pci) == 0) {
    other = NULL;
    rc = FN(f_bystr, "nvmlDeviceGetHandleByPciBusId_v2")(pci.busId, &other);
    printf("handle_by_pci %d %s\n", rc, other == d ? "same" : "other");
    other = NULL;
    rc = FN(f_bystr, "nvmlDeviceGetHandleByPciBusId_v2")(pci.legacy, &other);
    printf("handle_by_pci_legacy %d %s %s\n", rc, other == d ? "same" : "other", pci.legacy);
    printf("pci_info %s %u %u %u 0x%08X\n", pci.busId, pci.domain, pci.bus, pci.device, pci.pciDeviceId);
  }
  printf("handle_by_pci_garbage %d\n", FN(f_bystr, "nvmlDeviceGetHandleByPciBusId_v2")("not-a-bus-id", &other));
  unsigned int idx = 99, pm = 9, util[2] = {0, 0}, mw = 0;
  int cm = 9, cuda = 0;
  FN(f_devuint, "nvmlDeviceGetIndex")(d, &idx);
  rc_t pmrc = ((rc_t(*)(dev_t_, unsigned int *))sym("nvmlDeviceGetPersistenceMode"))(d, &pm);
  rc_t cmrc = ((rc_t(*)(dev_t_, int *))sym("nvmlDeviceGetComputeMode"))(d, &cm);
  rc_t urc = ((rc_t(*)(dev_t_, unsigned int *))sym("nvmlDeviceGetUtilizationRates"))(d, util);
  rc_t prc = FN(f_devuint, "nvmlDeviceGetPowerUsage")(d, &mw);
  rc_t crc = ((rc_t(*)(int *))sym("nvmlSystemGetCudaDriverVersion_v2"))(&cuda);
  printf("modes index=%u persistence=%d:%u computeMode=%d:%d utilization=%d:%u/%u powerMw=%d:%u cuda=%d:%d\n", idx, pmrc, pm,
         cmrc, cm, urc, util[0], util[1], prc, mw, crc, cuda);
  printf("version_short %d\n", FN(f_sysstr, "nvmlSystemGetDriverVersion")(buf, 4));

  unsigned int t;
  printf("temperature_bad_sensor %d\n", FN(f_temp, "nvmlDeviceGetTemperature")(d, 7, &t));
  rc = FN(f_temp, "nvmlDeviceGetTemperature")(d, 0, &t);
  printf("temperature %d %u\n", rc, t);
  unsigned int cur = 9, pend = 9;
  rc = FN(f_migmode, "nvmlDeviceGetMigMode")(d, &cur, &pend);
  printf("mig_mode %d %u %u\n", rc, cur, pend);
  unsigned int max = 0;
  rc = FN(f_devuint, "nvmlDeviceGetMaxMigDeviceCount")(d, &max);
  printf("mig_max %d %u\n", rc, max);
  for (unsigned int s = 0; rc == 0 && s < max; s++) {
    dev_t_ mig = NULL;
    rc_t mrc = FN(f_migh, "nvmlDeviceGetMigDeviceHandleByIndex")(d, s, &mig);
    printf("mig_slot %u %d", s, mrc);
    if (mrc == 0) {
      unsigned int gi = 0, ci = 0;
      uuid(mig, buf, sizeof buf);
      FN(f_devuint, "nvmlDeviceGetGpuInstanceId")(mig, &gi);
      FN(f_devuint, "nvmlDeviceGetComputeInstanceId")(mig, &ci);
      dev_t_ parent = NULL;
      rc_t prc = ((rc_t(*)(dev_t_, dev_t_ *))sym("nvmlDeviceGetDeviceHandleFromMigDeviceHandle"))(mig, &parent);
      memset(&m, 0, sizeof m);
      m.version = MEM_V2_VERSION;
      rc_t memrc = mem2(mig, &m);
      unsigned int pn = 0;
      rc_t prc2 = procs(mig, &pn, NULL);
      printf(" %s gi=%u ci=%u parent=%s mem=%d:%llu procs=%d:%u", buf, gi, ci, prc == 0 && parent == d ? "same" : "other",
             memrc, m.used, prc2, pn);
    }
    printf("\n");
  }
  printf("error_string_0 %s\n", errstr(0));
  printf("error_string_15 %s\n", errstr(15));
  printf("error_string_999 %s\n", errstr(999));
  printf("error_string_12345 %s\n", errstr(12345));
  int all = 1;
  for (int code = 0; code <= 30; code++) {
    const char *s = errstr(code);
    if (s == NULL || s[0] == '\0') all = 0;
  }
  printf("error_string_all_codes %d\n", all);
  printf("shutdown_last %d\n", shut());
  printf("count_after_last_shutdown %d\n", count_v2(&count));
  printf("memory_after_last_shutdown %d\n", mem2(d, &m));
  printf("shutdown_extra %d\n", shut());
  return 0;
}

static int cmd_symbols(int argc, char **argv) {
  for (int i = 0; i < argc; i++) printf("%s %s\n", argv[i], dlsym(lib, argv[i]) ? "present" : "absent");
  return 0;
}

static int cmd_stubs(int argc, char **argv) {
  rc_t before[64];
  if (argc > 64) argc = 64;
  for (int i = 0; i < argc; i++) before[i] = FN(f_void, argv[i])();
  if (do_init() != 0) return 3;
  for (int i = 0; i < argc; i++) printf("%s before=%d after=%d\n", argv[i], before[i], FN(f_void, argv[i])());
  FN(f_void, "nvmlShutdown")();
  return 0;
}

static int cmd_utilization(unsigned int index) {
  if (do_init() != 0) return 3;
  dev_t_ d = NULL;
  unsigned int util[2] = {0, 0};
  rc_t rc = FN(f_handle, "nvmlDeviceGetHandleByIndex_v2")(index, &d);
  if (rc == 0) rc = ((rc_t(*)(dev_t_, unsigned int *))sym("nvmlDeviceGetUtilizationRates"))(d, util);
  printf("utilization %d %u %u\n", rc, util[0], util[1]);
  FN(f_void, "nvmlShutdown")();
  return 0;
}

static int cmd_versions(void) {
  if (do_init() != 0) return 3;
  char buf[96];
  int cuda = 0;
  rc_t rc = FN(f_sysstr, "nvmlSystemGetDriverVersion")(buf, sizeof buf);
  printf("driver %d %s\n", rc, rc == 0 ? buf : "");
  rc = FN(f_sysstr, "nvmlSystemGetNVMLVersion")(buf, sizeof buf);
  printf("nvml %d %s\n", rc, rc == 0 ? buf : "");
  rc = ((rc_t(*)(int *))sym("nvmlSystemGetCudaDriverVersion"))(&cuda);
  printf("cuda %d %d\n", rc, cuda);
  FN(f_void, "nvmlShutdown")();
  return 0;
}

static int cmd_rawprocs(unsigned int index, const char *symbol) {
  if (do_init() != 0) return 3;
  dev_t_ d = NULL;
  rc_t rc = FN(f_handle, "nvmlDeviceGetHandleByIndex_v2")(index, &d);
  if (rc != 0) {
    printf("handle-failed rc=%d\n", rc);
    return 0;
  }
  unsigned char buf[4096];
  memset(buf, 0xAB, sizeof buf);
  unsigned int n = 64;
  rc = FN(f_procs, symbol)(d, &n, buf);
  size_t last = 0;
  for (size_t i = 0; i < sizeof buf; i++) {
    if (buf[i] != 0xAB) last = i + 1;
  }
  printf("rc=%d count=%u bytesWritten=%zu pids=", rc, n, last);
  size_t stride = n ? last / n : 0;
  for (unsigned int i = 0; i < n && stride; i++) {
    unsigned int pid;
    memcpy(&pid, buf + i * stride, sizeof pid);
    printf("%s%u", i ? "," : "", pid);
  }
  printf("\n");
  FN(f_void, "nvmlShutdown")();
  return 0;
}

/* Reads the _v3 compute list with `stride` bytes per entry and prints "pid:used" per entry. */
static int read_v3_with_stride(unsigned int index, size_t stride) {
  dev_t_ d = NULL;
  rc_t rc = FN(f_handle, "nvmlDeviceGetHandleByIndex_v2")(index, &d);
  if (rc != 0) {
    printf("handle-failed rc=%d\n", rc);
    return 0;
  }
  unsigned char buf[64 * 32];
  memset(buf, 0, sizeof buf);
  unsigned int n = 64;
  rc = FN(f_procs, "nvmlDeviceGetComputeRunningProcesses_v3")(d, &n, buf);
  printf("rc=%d stride=%zu", rc, stride);
  for (unsigned int i = 0; i < n && rc == 0; i++) {
    unsigned int pid;
    unsigned long long used;
    memcpy(&pid, buf + i * stride, sizeof pid);
    memcpy(&used, buf + i * stride + 8, sizeof used);
    printf(" %u:%llu", pid, used);
  }
  printf("\n");
  FN(f_void, "nvmlShutdown")();
  return 0;
}

static int cmd_procs24(unsigned int index) {
  if (do_init() != 0) return 3;
  return read_v3_with_stride(index, 24);
}

static int cmd_detect(unsigned int index) {
  if (do_init() != 0) return 3;
  int r535 = dlsym(lib, "nvmlDeviceGetConfComputeMemSizeInfo") != NULL && dlsym(lib, "nvmlDeviceGetRunningProcessDetailList") == NULL;
  return read_v3_with_stride(index, r535 ? 32 : 24);
}

typedef rc_t (*f_clock)(dev_t_, int, unsigned int *);
typedef rc_t (*f_ecc)(dev_t_, int, int, unsigned long long *);
typedef rc_t (*f_uint2)(dev_t_, unsigned int *, unsigned int *);
typedef rc_t (*f_int)(dev_t_, int *);
typedef rc_t (*f_int2)(dev_t_, int *, int *);
typedef struct { unsigned long long total, free, used; } bar1_info;
typedef rc_t (*f_bar1)(dev_t_, bar1_info *);
typedef struct { unsigned int version; int sensor; int temperature; } temp_v;
typedef rc_t (*f_tempv)(dev_t_, temp_v *);
typedef struct { unsigned int fieldId, scopeId; long long timestamp, latencyUsec; int valueType; rc_t ret; unsigned long long value; } field_value;
typedef rc_t (*f_fields)(dev_t_, int, field_value *);
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; unsigned long long cc; } proc_detail;
typedef struct { unsigned int version, mode, count; proc_detail *procs; } proc_detail_list;
typedef rc_t (*f_detail)(dev_t_, proc_detail_list *);
typedef struct { unsigned int pid; unsigned long long ts; unsigned int sm, mem, enc, dec; } proc_util;
typedef rc_t (*f_putil)(dev_t_, proc_util *, unsigned int *, unsigned long long);
typedef struct { unsigned long long protectedKib, unprotectedKib; } cc_mem;
typedef rc_t (*f_ccmem)(dev_t_, cc_mem *);

/* A symbol this library may lack: NULL (and "name absent" printed) instead of exiting. */
static void *maybe(const char *name) {
  void *p = dlsym(lib, name);
  if (p == NULL) printf("%s absent\n", name);
  return p;
}

static int cmd_migextra(unsigned int index) {
  if (do_init() != 0) return 3;
  dev_t_ d = NULL;
  rc_t rc = FN(f_handle, "nvmlDeviceGetHandleByIndex_v2")(index, &d);
  if (rc != 0) {
    printf("handle-failed rc=%d\n", rc);
    return 0;
  }
  unsigned int max = 99, isMig = 9;
  rc = FN(f_devuint, "nvmlDeviceGetMaxMigDeviceCount")(d, &max);
  printf("max %d %u\n", rc, max);
  FN(f_devuint, "nvmlDeviceIsMigDeviceHandle")(d, &isMig);
  printf("parent_is_mig %u\n", isMig);
  for (unsigned int slot = 0; slot < max && rc == 0; slot++) {
    dev_t_ m = NULL;
    rc_t got = FN(f_migh, "nvmlDeviceGetMigDeviceHandleByIndex")(d, slot, &m);
    if (got != 0) {
      printf("slot %u %d\n", slot, got);
      continue;
    }
    bar1_info bar1 = {0, 0, 0};
    rc_t b = FN(f_bar1, "nvmlDeviceGetBAR1MemoryInfo")(m, &bar1);
    isMig = 9;
    FN(f_devuint, "nvmlDeviceIsMigDeviceHandle")(m, &isMig);
    unsigned int n = 0;
    rc_t p = FN(f_procs, "nvmlDeviceGetComputeRunningProcesses_v3")(m, &n, NULL);
    printf("slot %u 0 is_mig=%u bar1=%d:%llu procs=%d:%u\n", slot, isMig, b, bar1.total, p, n);
  }
  proc_v2 list[64];
  unsigned int n = 64;
  rc = FN(f_procs, "nvmlDeviceGetComputeRunningProcesses_v3")(d, &n, list);
  printf("parent_procs %d", rc);
  for (unsigned int k = 0; k < n && rc == 0; k++) printf(" %u:%u:%u", list[k].pid, list[k].gi, list[k].ci);
  printf("\n");
  FN(f_void, "nvmlShutdown")();
  return 0;
}

static int cmd_telemetry(unsigned int index) {
  if (do_init() != 0) return 3;
  dev_t_ d = NULL;
  rc_t rc = FN(f_handle, "nvmlDeviceGetHandleByIndex_v2")(index, &d);
  if (rc != 0) {
    printf("handle-failed rc=%d\n", rc);
    return 0;
  }
  unsigned int u = 0, u2 = 0;
  int i1 = -1, i2 = -1;
  unsigned long long ull = 0;
  rc = FN(f_devuint, "nvmlDeviceGetFanSpeed")(d, &u);
  printf("fan %d %u\n", rc, u);
  rc = FN(f_devuint, "nvmlDeviceGetPowerManagementLimit")(d, &u);
  printf("power_limit %d %u\n", rc, u);
  rc = FN(f_devuint, "nvmlDeviceGetEnforcedPowerLimit")(d, &u);
  printf("enforced_power_limit %d %u\n", rc, u);
  for (int c = 0; c < 4; c++) {
    unsigned int cur = 0, max = 0;
    rc_t a = FN(f_clock, "nvmlDeviceGetClockInfo")(d, c, &cur);
    rc_t b = FN(f_clock, "nvmlDeviceGetMaxClockInfo")(d, c, &max);
    printf("clock_%d %d %u %d %u\n", c, a, cur, b, max);
  }
  rc = FN(f_int, "nvmlDeviceGetPerformanceState")(d, &i1);
  printf("pstate %d %d\n", rc, i1);
  for (int e = 0; e < 2; e++) {
    ull = 0;
    rc = FN(f_ecc, "nvmlDeviceGetTotalEccErrors")(d, e, 0, &ull);
    printf("ecc_%d %d %llu\n", e, rc, ull);
  }
  rc = FN(f_uint2, "nvmlDeviceGetEncoderUtilization")(d, &u, &u2);
  printf("encoder %d %u %u\n", rc, u, u2);
  rc = FN(f_uint2, "nvmlDeviceGetDecoderUtilization")(d, &u, &u2);
  printf("decoder %d %u %u\n", rc, u, u2);
  rc = FN(f_int, "nvmlDeviceGetDisplayActive")(d, &i1);
  printf("display_active %d %d\n", rc, i1);
  rc = FN(f_int, "nvmlDeviceGetDisplayMode")(d, &i1);
  printf("display_mode %d %d\n", rc, i1);
  rc = FN(f_int2, "nvmlDeviceGetDriverModel")(d, &i1, &i2);
  printf("driver_model %d\n", rc);
  rc = FN(f_clock, "nvmlDeviceGetPcieThroughput")(d, 0, &u);
  rc_t rx = FN(f_clock, "nvmlDeviceGetPcieThroughput")(d, 1, &u2);
  printf("pcie %d %u %d %u\n", rc, u, rx, u2);
  char serial[64] = "";
  rc = FN(f_str, "nvmlDeviceGetSerial")(d, serial, sizeof serial);
  printf("serial %d %s\n", rc, serial);
  bar1_info bar1 = {0, 0, 0};
  rc = FN(f_bar1, "nvmlDeviceGetBAR1MemoryInfo")(d, &bar1);
  printf("bar1 %d %llu %llu %llu\n", rc, bar1.total, bar1.free, bar1.used);
  field_value fv[3];
  memset(fv, 0, sizeof fv);
  fv[0].fieldId = 186;
  fv[1].fieldId = 91;
  fv[2].fieldId = 9999;
  rc = FN(f_fields, "nvmlDeviceGetFieldValues")(d, 3, fv);
  printf("fields %d %d:%d:%u %d:%d:%u %d\n", rc, fv[0].ret, fv[0].valueType, (unsigned)fv[0].value, fv[1].ret, fv[1].valueType,
         (unsigned)fv[1].value, fv[2].ret);
  proc_util pu[16];
  unsigned int pn = 0;
  rc = FN(f_putil, "nvmlDeviceGetProcessUtilization")(d, NULL, &pn, 0);
  printf("process_utilization_size %d %u\n", rc, pn);
  if (rc == 7 && pn <= 16) {
    rc = FN(f_putil, "nvmlDeviceGetProcessUtilization")(d, pu, &pn, 0);
    printf("process_utilization %d", rc);
    for (unsigned int k = 0; k < pn; k++) printf(" %u:%u:%u", pu[k].pid, pu[k].sm, pu[k].mem);
    printf("\n");
  }
  unsigned int isMig = 9;
  rc = FN(f_devuint, "nvmlDeviceIsMigDeviceHandle")(d, &isMig);
  printf("is_mig %d %u\n", rc, isMig);
  f_tempv tempv = (f_tempv)maybe("nvmlDeviceGetTemperatureV");
  if (tempv) {
    temp_v t = {(unsigned int)(sizeof(temp_v) | (1u << 24)), 0, -1};
    rc = tempv(d, &t);
    temp_v bad = {(unsigned int)(sizeof(temp_v) | (2u << 24)), 0, -1};
    printf("temperature_v %d %d %d\n", rc, t.temperature, tempv(d, &bad));
  }
  f_ccmem ccmem = (f_ccmem)maybe("nvmlDeviceGetConfComputeMemSizeInfo");
  if (ccmem) {
    cc_mem m = {1, 1};
    rc = ccmem(d, &m);
    printf("conf_compute_mem %d %llu %llu\n", rc, m.protectedKib, m.unprotectedKib);
  }
  f_detail detail = (f_detail)maybe("nvmlDeviceGetRunningProcessDetailList");
  if (detail) {
    proc_detail procs[16];
    proc_detail_list list = {(unsigned int)(sizeof(proc_detail_list) | (1u << 24)), 0, 0, NULL};
    rc_t sized = detail(d, &list);
    unsigned int needed = list.count;
    list.count = 16;
    list.procs = procs;
    rc = needed ? detail(d, &list) : sized;
    printf("detail_list %d %u %d", sized, needed, rc);
    for (unsigned int k = 0; k < list.count && rc == 0 && needed; k++) printf(" %u:%llu:%u", procs[k].pid, procs[k].used, procs[k].gi);
    printf("\n");
  }
  FN(f_void, "nvmlShutdown")();
  return 0;
}

static int cmd_interactive(void) {
  if (do_init() != 0) return 3;
  printf("ready\n");
  fflush(stdout);
  char line[256];
  while (fgets(line, sizeof line, stdin) != NULL) {
    unsigned int index = 0;
    dev_t_ d = NULL;
    if (strncmp(line, "quit", 4) == 0) break;
    if (sscanf(line, "mem %u", &index) == 1) {
      rc_t rc = FN(f_handle, "nvmlDeviceGetHandleByIndex_v2")(index, &d);
      mem_v2 m;
      memset(&m, 0, sizeof m);
      m.version = MEM_V2_VERSION;
      if (rc == 0) rc = FN(f_mem2, "nvmlDeviceGetMemoryInfo_v2")(d, &m);
      printf("mem %u rc=%d used=%llu free=%llu\n", index, rc, m.used, m.free);
    } else if (sscanf(line, "procs %u", &index) == 1) {
      rc_t rc = FN(f_handle, "nvmlDeviceGetHandleByIndex_v2")(index, &d);
      unsigned int n = 0;
      if (rc == 0) rc = FN(f_procs, "nvmlDeviceGetComputeRunningProcesses_v3")(d, &n, NULL);
      printf("procs %u rc=%d count=%u\n", index, rc, n);
    } else if (strncmp(line, "state", 5) == 0) {
      unsigned int count = 0;
      FN(f_uint, "nvmlDeviceGetCount_v2")(&count);
      printf("state");
      for (unsigned int i = 0; i < count; i++) {
        mem_v2 m;
        memset(&m, 0, sizeof m);
        m.version = MEM_V2_VERSION;
        unsigned int n = 0;
        rc_t rc = FN(f_handle, "nvmlDeviceGetHandleByIndex_v2")(i, &d);
        if (rc == 0) rc = FN(f_mem2, "nvmlDeviceGetMemoryInfo_v2")(d, &m);
        if (rc == 0) FN(f_procs, "nvmlDeviceGetComputeRunningProcesses_v3")(d, &n, NULL);
        printf(" %llu/%u", m.used, n);
      }
      printf("\n");
    } else {
      printf("unknown command\n");
    }
    fflush(stdout);
  }
  FN(f_void, "nvmlShutdown")();
  return 0;
}

static int cmd_bench(long iterations) {
  if (do_init() != 0) return 3;
  dev_t_ d = NULL;
  FN(f_handle, "nvmlDeviceGetHandleByIndex_v2")(0, &d);
  f_mem2 mem2 = FN(f_mem2, "nvmlDeviceGetMemoryInfo_v2");
  mem_v2 m;
  memset(&m, 0, sizeof m);
  m.version = MEM_V2_VERSION;
  double best = 1e30;
  for (int round = 0; round < 5; round++) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < iterations; i++) {
      if (mem2(d, &m) != 0) {
        printf("bench-failed\n");
        return 1;
      }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)iterations;
    if (ns < best) best = ns;
  }
  printf("nsPerCall=%.1f\n", best);
  FN(f_void, "nvmlShutdown")();
  return 0;
}

static volatile int side_done = 0;

static void *side_thread(void *arg) {
  unsigned int index = (unsigned int)(uintptr_t)arg;
  dev_t_ d = NULL;
  FN(f_handle, "nvmlDeviceGetHandleByIndex_v2")(index, &d);
  mem_v2 m;
  memset(&m, 0, sizeof m);
  m.version = MEM_V2_VERSION;
  FN(f_mem2, "nvmlDeviceGetMemoryInfo_v2")(d, &m);
  side_done = 1;
  return NULL;
}

static int cmd_threads(unsigned int index) {
  if (do_init() != 0) return 3;
  pthread_t t;
  pthread_create(&t, NULL, side_thread, (void *)(uintptr_t)index);
  usleep(100 * 1000);
  dev_t_ d = NULL;
  FN(f_handle, "nvmlDeviceGetHandleByIndex_v2")(0, &d);
  int ok = 0;
  for (int i = 0; i < 100; i++) {
    mem_v2 m;
    memset(&m, 0, sizeof m);
    m.version = MEM_V2_VERSION;
    if (FN(f_mem2, "nvmlDeviceGetMemoryInfo_v2")(d, &m) == 0) ok++;
  }
  printf("main-thread-reads-ok=%d side-thread-done=%d\n", ok, side_done);
  fflush(stdout);
  _exit(0);  /* the side thread may be hung inside the library: do not join it */
}

int main(int argc, char **argv) {
  const char *path = "libnvidia-ml.so.1";
  int repeat = 1;
  int i = 1;
  for (; i < argc; i++) {
    if (strcmp(argv[i], "--lib") == 0 && i + 1 < argc) path = argv[++i];
    else if (strcmp(argv[i], "--v1") == 0) use_v1 = 1;
    else if (strcmp(argv[i], "--no-shutdown") == 0) skip_shutdown = 1;
    else if (strcmp(argv[i], "--then") == 0 && i + 1 < argc) then_scenario = argv[++i];
    else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) repeat = atoi(argv[++i]);
    else break;
  }
  if (i >= argc) {
    fprintf(stderr, "usage: nvml_client [--lib PATH] [--v1] [--repeat N] dump|probe|symbols|rawprocs|interactive|bench\n");
    return 2;
  }
  lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "nvml_client: cannot load %s: %s\n", path, dlerror());
    return 5;
  }
  const char *cmd = argv[i++];
  if (strcmp(cmd, "dump") == 0) return cmd_dump(repeat);
  if (strcmp(cmd, "probe") == 0) return cmd_probe();
  if (strcmp(cmd, "symbols") == 0) return cmd_symbols(argc - i, argv + i);
  if (strcmp(cmd, "stubs") == 0) return cmd_stubs(argc - i, argv + i);
  if (strcmp(cmd, "utilization") == 0 && i < argc) return cmd_utilization((unsigned int)atoi(argv[i]));
  if (strcmp(cmd, "versions") == 0) return cmd_versions();
  if (strcmp(cmd, "rawprocs") == 0 && i < argc) {
    return cmd_rawprocs((unsigned int)atoi(argv[i]), i + 1 < argc ? argv[i + 1] : "nvmlDeviceGetComputeRunningProcesses_v3");
  }
  if (strcmp(cmd, "procs24") == 0 && i < argc) return cmd_procs24((unsigned int)atoi(argv[i]));
  if (strcmp(cmd, "detect") == 0 && i < argc) return cmd_detect((unsigned int)atoi(argv[i]));
  if (strcmp(cmd, "telemetry") == 0 && i < argc) return cmd_telemetry((unsigned int)atoi(argv[i]));
  if (strcmp(cmd, "migextra") == 0 && i < argc) return cmd_migextra((unsigned int)atoi(argv[i]));
  if (strcmp(cmd, "interactive") == 0) return cmd_interactive();
  if (strcmp(cmd, "threads") == 0 && i < argc) return cmd_threads((unsigned int)atoi(argv[i]));
  if (strcmp(cmd, "bench") == 0 && i < argc) return cmd_bench(atol(argv[i]));
  fprintf(stderr, "nvml_client: unknown command %s\n", cmd);
  return 2;
}
