// NVML MIG entry points: the MIG slot count (0 while MIG mode is off), MIG device handles by
// slot (holes answer NOT_FOUND), whether a handle is a MIG device, the parent of a MIG handle,
// and a MIG device's GPU / compute instance ids.
#include "device_call.h"
#include "export.h"

using namespace gpugate_sim;

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  return withDevice(kSym_nvmlDeviceGetMaxMigDeviceCount, device, false, [&](Resolved& r) {
    if (count == nullptr || r.mig != nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r.device->migMode.supported) return NVML_ERROR_NOT_SUPPORTED;
    *count = migEnabled(*r.device) ? r.device->maxMigDevices : 0;  // as NVML documents: 0 with MIG off
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* isMigDevice) {
  return withDevice(kSym_nvmlDeviceIsMigDeviceHandle, device, false, [&](Resolved& r) {
    if (isMigDevice == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *isMigDevice = r.mig != nullptr ? 1 : 0;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                                 nvmlDevice_t* migDevice) {
  return withDevice(kSym_nvmlDeviceGetMigDeviceHandleByIndex, device, false, [&](Resolved& r) {
    if (migDevice == nullptr || r.mig != nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const SimDevice& d = *r.device;
    if (!d.migMode.supported) return NVML_ERROR_NOT_SUPPORTED;
    if (index >= d.maxMigDevices) return NVML_ERROR_INVALID_ARGUMENT;
    if (!d.migMode.value) return NVML_ERROR_NOT_FOUND;
    for (const auto& m : d.migDevices) {
      if (m.slot == static_cast<int>(index)) {
        *migDevice = handleFor(r.index, m.slot);
        return NVML_SUCCESS;
      }
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t* device) {
  return withDevice(kSym_nvmlDeviceGetDeviceHandleFromMigDeviceHandle, migDevice, false, [&](Resolved& r) {
    if (device == nullptr || r.mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *device = handleFor(r.index, -1);
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  return withDevice(kSym_nvmlDeviceGetGpuInstanceId, device, false, [&](Resolved& r) {
    if (id == nullptr || r.mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *id = r.mig->gpuInstanceId;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  return withDevice(kSym_nvmlDeviceGetComputeInstanceId, device, false, [&](Resolved& r) {
    if (id == nullptr || r.mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *id = r.mig->computeInstanceId;
    return NVML_SUCCESS;
  });
}
