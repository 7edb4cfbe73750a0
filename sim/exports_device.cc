// NVML entry points that enumerate GPUs and read their identity, modes and health:
// count, handles (by index, UUID, PCI bus id), name, UUID, index, minor number, PCI info,
// compute capability, persistence / compute / MIG mode, utilisation, temperature, power.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "device_call.h"
#include "export.h"

using namespace gpugate_sim;

namespace {

nvmlReturn_t getCount(int sym, unsigned int* count) {
  nvmlReturn_t rc;
  if (gate(sym, -1, &rc)) return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  *count = static_cast<unsigned int>(rt.live.devices.size());
  return NVML_SUCCESS;
}

nvmlReturn_t handleByIndex(int sym, unsigned int index, nvmlDevice_t* device) {
  nvmlReturn_t rc;
  if (gate(sym, index < static_cast<unsigned>(kMaxDevices) ? static_cast<int>(index) : -1, &rc)) return rc;
  if (device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  if (index >= rt.live.devices.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = handleFor(static_cast<int>(index), -1);
  return NVML_SUCCESS;
}

nvmlReturn_t handleByPciBusId(int sym, const char* busId, nvmlDevice_t* device) {
  nvmlReturn_t rc;
  if (gate(sym, -1, &rc)) return rc;
  if (busId == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned domain, bus, dev, fn;
  if (!parsePciBusId(busId, domain, bus, dev, fn)) return NVML_ERROR_INVALID_ARGUMENT;
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  for (size_t i = 0; i < rt.live.devices.size(); i++) {
    const SimDevice& d = rt.live.devices[i];
    if (d.pciDomain == domain && d.pciBus == bus && d.pciDevice == dev && d.pciFunction == fn) {
      *device = handleFor(static_cast<int>(i), -1);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

// The oldest nvmlPciInfo_t layout, written by the plain nvmlDeviceGetPciInfo: a 16-byte bus id,
// the five ids, then four reserved words (52 bytes). Newer fields are not written.
struct PciInfoV1 {
  char busId[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  unsigned int reserved0, reserved1, reserved2, reserved3;
};
static_assert(sizeof(PciInfoV1) == 52, "nvmlPciInfo_t v1 layout");

nvmlReturn_t pciInfo(int sym, nvmlDevice_t h, void* out, bool v1) {
  return withDevice(sym, h, true, [&](Resolved& r) -> nvmlReturn_t {
    if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const SimDevice& d = *r.device;
    char legacy[32];
    int legacyLength = snprintf(legacy, sizeof legacy, "%04X:%02X:%02X.%X", d.pciDomain & 0xFFFFu, d.pciBus & 0xFFu,
                                d.pciDevice & 0x1Fu, d.pciFunction & 0x7u);
    size_t legacyCopy = legacyLength > 15 ? 15 : static_cast<size_t>(legacyLength);
    size_t busIdCopy = d.pciBusId.size() > 31 ? 31 : d.pciBusId.size();
    if (v1) {
      PciInfoV1 p{};
      memcpy(p.busId, legacy, legacyCopy);
      p.domain = d.pciDomain;
      p.bus = d.pciBus;
      p.device = d.pciDevice;
      p.pciDeviceId = d.pciDeviceId;
      p.pciSubSystemId = d.pciSubSystemId;
      memcpy(out, &p, sizeof p);
    } else {
      nvmlPciInfo_t p{};
      memcpy(p.busIdLegacy, legacy, legacyCopy);
      p.domain = d.pciDomain;
      p.bus = d.pciBus;
      p.device = d.pciDevice;
      p.pciDeviceId = d.pciDeviceId;
      p.pciSubSystemId = d.pciSubSystemId;
      memcpy(p.busId, d.pciBusId.data(), busIdCopy);
      memcpy(out, &p, sizeof p);
    }
    return NVML_SUCCESS;
  });
}

}  // namespace

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) { return getCount(kSym_nvmlDeviceGetCount, count); }

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return handleByIndex(kSym_nvmlDeviceGetHandleByIndex, index, device);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* pciBusId, nvmlDevice_t* device) {
  return handleByPciBusId(kSym_nvmlDeviceGetHandleByPciBusId, pciBusId, device);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return pciInfo(kSym_nvmlDeviceGetPciInfo, device, pci, true);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) { return getCount(kSym_nvmlDeviceGetCount_v2, count); }

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  return handleByIndex(kSym_nvmlDeviceGetHandleByIndex_v2, index, device);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* pciBusId, nvmlDevice_t* device) {
  return handleByPciBusId(kSym_nvmlDeviceGetHandleByPciBusId_v2, pciBusId, device);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return pciInfo(kSym_nvmlDeviceGetPciInfo_v2, device, pci, false);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return pciInfo(kSym_nvmlDeviceGetPciInfo_v3, device, pci, false);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  nvmlReturn_t rc;
  if (gate(kSym_nvmlDeviceGetHandleByUUID, -1, &rc)) return rc;
  if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  Runtime& rt = runtime();
  std::lock_guard<std::mutex> lock(rt.mu);
  for (size_t i = 0; i < rt.live.devices.size(); i++) {
    const SimDevice& d = rt.live.devices[i];
    if (d.uuid == uuid) {
      *device = handleFor(static_cast<int>(i), -1);
      return NVML_SUCCESS;
    }
    if (!migEnabled(d)) continue;
    for (const auto& m : d.migDevices) {
      if (m.uuid == uuid) {
        *device = handleFor(static_cast<int>(i), m.slot);
        return NVML_SUCCESS;
      }
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  return withDevice(kSym_nvmlDeviceGetName, device, false, [&](Resolved& r) {
    if (r.mig == nullptr) return copyString(r.device->name, name, length);
    if (!r.mig->name.empty()) return copyString(r.mig->name, name, length);
    return copyString(r.device->name + " MIG", name, length);
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  return withDevice(kSym_nvmlDeviceGetUUID, device, false, [&](Resolved& r) {
    return copyString(r.mig != nullptr ? r.mig->uuid : r.device->uuid, uuid, length);
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  return withDevice(kSym_nvmlDeviceGetIndex, device, true, [&](Resolved& r) {
    if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *index = static_cast<unsigned int>(r.index);
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minorNumber) {
  return withDevice(kSym_nvmlDeviceGetMinorNumber, device, true, [&](Resolved& r) {
    if (minorNumber == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *minorNumber = r.device->minorNumber;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  return withDevice(kSym_nvmlDeviceGetCudaComputeCapability, device, false, [&](Resolved& r) {
    if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *major = r.device->ccMajor;
    *minor = r.device->ccMinor;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, int* mode) {
  return withDevice(kSym_nvmlDeviceGetPersistenceMode, device, true, [&](Resolved& r) {
    if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r.device->persistenceMode.supported) return NVML_ERROR_NOT_SUPPORTED;
    *mode = r.device->persistenceMode.value ? 1 : 0;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, int* mode) {
  return withDevice(kSym_nvmlDeviceGetComputeMode, device, true, [&](Resolved& r) {
    if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r.device->computeMode.supported) return NVML_ERROR_NOT_SUPPORTED;
    *mode = r.device->computeMode.value;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode, unsigned int* pendingMode) {
  return withDevice(kSym_nvmlDeviceGetMigMode, device, true, [&](Resolved& r) {
    if (currentMode == nullptr || pendingMode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const SimDevice& d = *r.device;
    if (!d.migMode.supported) return NVML_ERROR_NOT_SUPPORTED;
    *currentMode = d.migMode.value ? 1 : 0;
    *pendingMode = (d.migModePendingSet ? d.migModePending : d.migMode.value) ? 1 : 0;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  return withDevice(kSym_nvmlDeviceGetUtilizationRates, device, true, [&](Resolved& r) {
    if (utilization == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    // A GPU in MIG mode has no whole-GPU utilisation: the driver answers NOT_SUPPORTED.
    bool inMigMode = r.device->migMode.supported && r.device->migMode.value;
    if (!r.device->utilization.supported || inMigMode) return NVML_ERROR_NOT_SUPPORTED;
    utilization->gpu = r.device->utilization.value.gpu;
    utilization->memory = r.device->utilization.value.memory;
    return NVML_SUCCESS;
  });
}

// nvmlDeviceAddressingMode_v1_t: {u32 version, u32 value}; version = sizeof | 1 << 24 (R580 header).
constexpr unsigned kAddressingModeV1 = 0x01000008;

// A discrete GPU where neither HMM nor ATS is active: NVML_DEVICE_ADDRESSING_MODE_NONE (0).
GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetAddressingMode(nvmlDevice_t device, unsigned int* mode) {
  return withDevice(kSym_nvmlDeviceGetAddressingMode, device, true, [&](Resolved&) {
    if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (mode[0] != kAddressingModeV1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    mode[1] = 0;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensorType, unsigned int* temp) {
  return withDevice(kSym_nvmlDeviceGetTemperature, device, true, [&](Resolved& r) {
    if (temp == nullptr || sensorType != GPUGATE_NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r.device->temperatureC.supported) return NVML_ERROR_NOT_SUPPORTED;
    *temp = r.device->temperatureC.value;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* powerMilliwatts) {
  return withDevice(kSym_nvmlDeviceGetPowerUsage, device, true, [&](Resolved& r) {
    if (powerMilliwatts == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r.device->powerWatts.supported) return NVML_ERROR_NOT_SUPPORTED;
    *powerMilliwatts = static_cast<unsigned int>(llround(r.device->powerWatts.value * 1000.0));
    return NVML_SUCCESS;
  });
}
