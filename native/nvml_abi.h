// gpugate's own declarations of the NVML C ABI subset it uses.
//
// Written from NVML's documented ABI (LP64 Linux); no NVIDIA header is needed to build.
// Both the addon (native/) and the simulator library (sim/) include this file, so the two
// sides of the dlopen boundary agree by construction. Every versioned entry point is
// declared with the struct it really takes: the plain exported names are the oldest ABI
// (e.g. plain nvmlDeviceGetComputeRunningProcesses fills 16-byte entries).
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int nvmlReturn_t;  // a C enum: 4 bytes on every supported ABI
typedef struct gpugateNvmlDevice* nvmlDevice_t;

enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_INVALID_STATE = 29,
  NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
  NVML_ERROR_UNKNOWN = 999,
};

// Buffer sizes the documentation asks callers to provide.
enum {
  GPUGATE_NVML_DEVICE_NAME_BUFFER_SIZE = 96,
  GPUGATE_NVML_DEVICE_UUID_BUFFER_SIZE = 96,
  GPUGATE_NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80,
  GPUGATE_NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE = 80,
  GPUGATE_NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32,
  GPUGATE_NVML_PCI_BUS_ID_LEGACY_SIZE = 16,
};

// usedGpuMemory value meaning "not available"; instance id meaning "not a MIG instance".
#define GPUGATE_NVML_VALUE_NOT_AVAILABLE_U64 0xFFFFFFFFFFFFFFFFull
#define GPUGATE_NVML_INSTANCE_ID_NONE 0xFFFFFFFFu

enum { GPUGATE_NVML_TEMPERATURE_GPU = 0 };

// Versioned structs carry sizeof(struct) | (version << 24) in their first field.
#define GPUGATE_NVML_STRUCT_VERSION(type, ver) ((unsigned int)(sizeof(type) | ((ver) << 24U)))

typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;  // includes reserved memory
} nvmlMemory_v1_t;

typedef struct {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;  // excludes reserved memory
} nvmlMemory_v2_t;

#define GPUGATE_NVML_MEMORY_V2_VERSION GPUGATE_NVML_STRUCT_VERSION(nvmlMemory_v2_t, 2)

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

// What drivers 535.43..535.86 wrote from the _v3 entry points: 32-byte entries.
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
  unsigned long long usedGpuCcProtectedMemory;
} nvmlProcessInfo_r535_t;

typedef struct {
  char busIdLegacy[GPUGATE_NVML_PCI_BUS_ID_LEGACY_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[GPUGATE_NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

// nvmlDeviceGetGpuFabricInfo: where an NVSwitch-attached GPU stands in fabric registration.
enum { GPUGATE_NVML_GPU_FABRIC_UUID_LEN = 16 };
typedef struct {
  unsigned char clusterUuid[GPUGATE_NVML_GPU_FABRIC_UUID_LEN];
  nvmlReturn_t status;     // the registration's result, once the state is "completed"
  unsigned int cliqueId;
  unsigned char state;     // nvmlGpuFabricState_t: 0 not supported, 1 not started, 2 in progress, 3 completed
} nvmlGpuFabricInfo_t;

// nvmlDeviceGetFieldValues: the caller fills fieldId (and scopeId); the library fills the rest,
// with a return code per field. The value is a union; valueType says which member holds it.
typedef union {
  double asDouble;
  unsigned int asUInt;
  unsigned long asULong;
  unsigned long long asULongLong;
  signed long long asSLongLong;
  int asInt;
  unsigned short asUShort;
} nvmlFieldValueUnion_t;

typedef struct {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;    // microseconds since the epoch, when the value was read
  long long latencyUsec;  // how long the read took
  int valueType;          // which union member holds the value (nvmlValueType_t)
  nvmlReturn_t nvmlReturn;
  nvmlFieldValueUnion_t value;
} nvmlFieldValue_t;

// Field 230: what the driver says must be done before the GPU is usable again
// (nvmlDeviceGpuRecoveryAction_t: 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset).
enum { GPUGATE_NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 230 };

// Layout checks: these are the ABI facts; a wrong one is a silent memory corruption.
#ifdef __cplusplus
static_assert(sizeof(nvmlMemory_v1_t) == 24, "nvmlMemory_t");
static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t");
static_assert(offsetof(nvmlMemory_v2_t, reserved) == 16, "nvmlMemory_v2_t.reserved");
static_assert(GPUGATE_NVML_MEMORY_V2_VERSION == 0x02000028u, "nvmlMemory_v2 version");
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t");
static_assert(sizeof(nvmlProcessInfo_v2_t) == 24, "nvmlProcessInfo_v2_t");
static_assert(sizeof(nvmlProcessInfo_r535_t) == 32, "535 entry");
static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t");
static_assert(offsetof(nvmlPciInfo_t, busId) == 36, "nvmlPciInfo_t.busId");
static_assert(sizeof(nvmlGpuFabricInfo_t) == 28, "nvmlGpuFabricInfo_t");
static_assert(offsetof(nvmlGpuFabricInfo_t, state) == 24, "nvmlGpuFabricInfo_t.state");
static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t");
static_assert(offsetof(nvmlFieldValue_t, nvmlReturn) == 28, "nvmlFieldValue_t.nvmlReturn");
static_assert(offsetof(nvmlFieldValue_t, value) == 32, "nvmlFieldValue_t.value");
#endif

// Function pointer types, one per entry point gpugate resolves (exported names in comments).
typedef nvmlReturn_t (*nvmlInit_fn)(void);                           // nvmlInit_v2, nvmlInit
typedef nvmlReturn_t (*nvmlShutdown_fn)(void);                       // nvmlShutdown
typedef const char* (*nvmlErrorString_fn)(nvmlReturn_t);            // nvmlErrorString
typedef nvmlReturn_t (*nvmlSystemGetString_fn)(char*, unsigned int);  // driver / NVML version
typedef nvmlReturn_t (*nvmlSystemGetCudaDriverVersion_fn)(int*);      // _v2, plain
typedef nvmlReturn_t (*nvmlDeviceGetCount_fn)(unsigned int*);                      // _v2, plain
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_fn)(unsigned int, nvmlDevice_t*);  // _v2, plain
typedef nvmlReturn_t (*nvmlDeviceGetString_fn)(nvmlDevice_t, char*, unsigned int);   // Name, UUID
typedef nvmlReturn_t (*nvmlDeviceGetUInt_fn)(nvmlDevice_t, unsigned int*);  // Index, MinorNumber, ...
typedef nvmlReturn_t (*nvmlDeviceGetPciInfo_fn)(nvmlDevice_t, nvmlPciInfo_t*);  // _v3, _v2, plain
typedef nvmlReturn_t (*nvmlDeviceGetCudaComputeCapability_fn)(nvmlDevice_t, int*, int*);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_v1_fn)(nvmlDevice_t, nvmlMemory_v1_t*);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_v2_fn)(nvmlDevice_t, nvmlMemory_v2_t*);
// Process lists: the entry type depends on the variant bound (v1 16 bytes, v2/v3 24 bytes).
typedef nvmlReturn_t (*nvmlDeviceGetProcesses_fn)(nvmlDevice_t, unsigned int*, void*);
typedef nvmlReturn_t (*nvmlDeviceGetMigMode_fn)(nvmlDevice_t, unsigned int*, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetUtilizationRates_fn)(nvmlDevice_t, nvmlUtilization_t*);
typedef nvmlReturn_t (*nvmlDeviceGetTemperature_fn)(nvmlDevice_t, int /*sensor*/, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetMigDeviceHandleByIndex_fn)(nvmlDevice_t, unsigned int, nvmlDevice_t*);
// Health readings (gpugate doctor).
typedef nvmlReturn_t (*nvmlDeviceGetRemappedRows_fn)(nvmlDevice_t, unsigned int* corrRows, unsigned int* uncRows,
                                                      unsigned int* isPending, unsigned int* failureOccurred);
typedef nvmlReturn_t (*nvmlDeviceGetTotalEccErrors_fn)(nvmlDevice_t, int /*errorType*/, int /*counterType*/, unsigned long long*);
typedef nvmlReturn_t (*nvmlDeviceGetRetiredPagesPendingStatus_fn)(nvmlDevice_t, int* /*nvmlEnableState_t*/);
typedef nvmlReturn_t (*nvmlDeviceGetClocksEventReasons_fn)(nvmlDevice_t, unsigned long long*);  // ...EventReasons, ...ThrottleReasons
typedef nvmlReturn_t (*nvmlDeviceGetGpuFabricInfo_fn)(nvmlDevice_t, nvmlGpuFabricInfo_t*);
typedef nvmlReturn_t (*nvmlDeviceGetFieldValues_fn)(nvmlDevice_t, int, nvmlFieldValue_t*);

// ECC counter selectors (nvmlMemoryErrorType_t, nvmlEccCounterType_t).
enum { GPUGATE_NVML_MEMORY_ERROR_UNCORRECTED_TYPE = 1, GPUGATE_NVML_VOLATILE_ECC_COUNTER = 0 };

#ifdef __cplusplus
}  // extern "C"
#endif
