// NVML health queries that `gpugate doctor` and DCGM-style checks make: remapped rows, retired
// pages pending a reset, clock event (throttle) reasons, the PCIe link as trained and at most,
// and fabric registration. Each answers from the scenario's device fields (defaults per GPU
// model, gpu_models.cc), or NOT_SUPPORTED where the scenario (or the model) sets the field to
// null; MIG handles answer NOT_SUPPORTED.
#include "device_call.h"
#include "export.h"

using namespace gpugate_sim;

namespace {

nvmlReturn_t clocksEventReasons(int sym, nvmlDevice_t device, unsigned long long* reasons) {
  return withDevice(sym, device, true, [&](Resolved& r) -> nvmlReturn_t {
    if (reasons == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r.device->clockEventReasons.supported) return NVML_ERROR_NOT_SUPPORTED;
    *reasons = r.device->clockEventReasons.value;
    return NVML_SUCCESS;
  });
}

/** One of the four PCIe link figures. */
nvmlReturn_t pcieLink(int sym, nvmlDevice_t device, unsigned int* out, unsigned SimPcieLink::*figure) {
  return withDevice(sym, device, true, [&](Resolved& r) -> nvmlReturn_t {
    if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r.device->pcieLink.supported) return NVML_ERROR_NOT_SUPPORTED;
    *out = r.device->pcieLink.value.*figure;
    return NVML_SUCCESS;
  });
}

}  // namespace

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corrRows, unsigned int* uncRows,
                                                       unsigned int* isPending, unsigned int* failureOccurred) {
  return withDevice(kSym_nvmlDeviceGetRemappedRows, device, true, [&](Resolved& r) -> nvmlReturn_t {
    if (corrRows == nullptr || uncRows == nullptr || isPending == nullptr || failureOccurred == nullptr) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (!r.device->remappedRows.supported) return NVML_ERROR_NOT_SUPPORTED;
    const SimRemappedRows& rows = r.device->remappedRows.value;
    *corrRows = rows.correctable;
    *uncRows = rows.uncorrectable;
    *isPending = rows.pending ? 1 : 0;
    *failureOccurred = rows.failureOccurred ? 1 : 0;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, int* isPending) {
  return withDevice(kSym_nvmlDeviceGetRetiredPagesPendingStatus, device, true, [&](Resolved& r) -> nvmlReturn_t {
    if (isPending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r.device->retiredPagesPending.supported) return NVML_ERROR_NOT_SUPPORTED;
    *isPending = r.device->retiredPagesPending.value ? 1 : 0;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long* reasons) {
  return clocksEventReasons(kSym_nvmlDeviceGetCurrentClocksThrottleReasons, device, reasons);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long* reasons) {
  return clocksEventReasons(kSym_nvmlDeviceGetCurrentClocksEventReasons, device, reasons);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int* generation) {
  return pcieLink(kSym_nvmlDeviceGetCurrPcieLinkGeneration, device, generation, &SimPcieLink::generation);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int* generation) {
  return pcieLink(kSym_nvmlDeviceGetMaxPcieLinkGeneration, device, generation, &SimPcieLink::maxGeneration);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int* width) {
  return pcieLink(kSym_nvmlDeviceGetCurrPcieLinkWidth, device, width, &SimPcieLink::width);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int* width) {
  return pcieLink(kSym_nvmlDeviceGetMaxPcieLinkWidth, device, width, &SimPcieLink::maxWidth);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t* info) {
  return withDevice(kSym_nvmlDeviceGetGpuFabricInfo, device, true, [&](Resolved& r) -> nvmlReturn_t {
    if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r.device->fabric.supported) return NVML_ERROR_NOT_SUPPORTED;
    const SimFabric& f = r.device->fabric.value;
    for (unsigned char& byte : info->clusterUuid) byte = 0;
    info->status = f.status;
    info->cliqueId = f.cliqueId;
    info->state = static_cast<unsigned char>(f.state);
    return NVML_SUCCESS;
  });
}
