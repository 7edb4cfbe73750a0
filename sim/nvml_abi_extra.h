// The NVML C ABI the simulator serves beyond what gpugate itself reads (native/nvml_abi.h):
// the structs, version words and enum values of the queries other NVML clients make (nvitop,
// gpustat, nvidia-ml-py, nvml-wrapper). Written from NVML's documented ABI (LP64 Linux).
#pragma once

#include "../native/nvml_abi.h"

extern "C" {

typedef struct {
  unsigned long long bar1Total;
  unsigned long long bar1Free;
  unsigned long long bar1Used;
} nvmlBAR1Memory_t;

typedef struct {
  unsigned long long protectedMemSizeKib;
  unsigned long long unprotectedMemSizeKib;
} nvmlConfComputeMemSizeInfo_t;

// nvmlDeviceGetRunningProcessDetailList: a versioned list header pointing at 32-byte entries
// (pid, usedGpuMemory, gpuInstanceId, computeInstanceId, usedGpuCcProtectedMemory).
typedef nvmlProcessInfo_r535_t nvmlProcessDetail_v1_t;

typedef struct {
  unsigned int version;
  unsigned int mode;  // 0 compute, 1 graphics, 2 MPS
  unsigned int numProcArrayEntries;
  nvmlProcessDetail_v1_t* procArray;
} nvmlProcessDetailList_t;

#define GPUGATE_NVML_PROCESS_DETAIL_LIST_V1_VERSION GPUGATE_NVML_STRUCT_VERSION(nvmlProcessDetailList_t, 1)

typedef struct {
  unsigned int pid;
  unsigned long long timeStamp;  // CPU time in microseconds
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

typedef struct {
  unsigned int version;
  int sensorType;  // nvmlTemperatureSensors_t
  int temperature;
} nvmlTemperature_t;

#define GPUGATE_NVML_TEMPERATURE_V1_VERSION GPUGATE_NVML_STRUCT_VERSION(nvmlTemperature_t, 1)


}  // extern "C"

// Enum values used by the queries above.
enum {
  GPUGATE_NVML_CLOCK_GRAPHICS = 0,
  GPUGATE_NVML_CLOCK_SM = 1,
  GPUGATE_NVML_CLOCK_MEM = 2,
  GPUGATE_NVML_CLOCK_VIDEO = 3,
  GPUGATE_NVML_MEMORY_ERROR_CORRECTED = 0,
  GPUGATE_NVML_MEMORY_ERROR_UNCORRECTED = 1,
  GPUGATE_NVML_VOLATILE_ECC = 0,
  GPUGATE_NVML_AGGREGATE_ECC = 1,
  GPUGATE_NVML_PCIE_UTIL_TX_BYTES = 0,
  GPUGATE_NVML_PCIE_UTIL_RX_BYTES = 1,
  GPUGATE_NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  GPUGATE_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  GPUGATE_NVML_FI_DEV_NVLINK_LINK_COUNT = 91,
  GPUGATE_NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138,
  GPUGATE_NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX = 141,
  GPUGATE_NVML_FI_DEV_POWER_INSTANT = 186,
};

static_assert(sizeof(nvmlBAR1Memory_t) == 24, "nvmlBAR1Memory_t");
static_assert(sizeof(nvmlConfComputeMemSizeInfo_t) == 16, "nvmlConfComputeMemSizeInfo_t");
static_assert(sizeof(nvmlProcessDetailList_t) == 24, "nvmlProcessDetailList_v1_t");
static_assert(GPUGATE_NVML_PROCESS_DETAIL_LIST_V1_VERSION == 0x01000018u, "nvmlProcessDetailList_v1 version");
static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "nvmlProcessUtilizationSample_t");
static_assert(sizeof(nvmlTemperature_t) == 12, "nvmlTemperature_v1_t");
static_assert(GPUGATE_NVML_TEMPERATURE_V1_VERSION == 0x0100000Cu, "nvmlTemperature_v1 version");
