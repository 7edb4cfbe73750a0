// NVML telemetry queries that monitoring tools make on every refresh: fans, power limits,
// clocks, performance state, ECC totals, encoder / decoder utilisation, display state, driver
// model, PCIe throughput, the versioned temperature query, serial number and field values.
// Each answers from the scenario's device fields (defaults per GPU model, gpu_models.cc), or
// NOT_SUPPORTED where the scenario sets the field to null; MIG handles answer NOT_SUPPORTED.
#include <cmath>
#include <ctime>

#include "device_call.h"
#include "export.h"
#include "nvml_abi_extra.h"
#include "symbols.h"

using namespace gpugate_sim;

namespace {

template <typename T, typename Out>
nvmlReturn_t answer(const Supported<T>& field, Out* out, Out value) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!field.supported) return NVML_ERROR_NOT_SUPPORTED;
  *out = value;
  return NVML_SUCCESS;
}

unsigned milliwatts(double watts) { return static_cast<unsigned>(llround(watts * 1000.0)); }

/** One clock domain (nvmlClockType_t) of `clocks`, or false for an unknown domain. */
bool clockOf(const SimClocks& clocks, int type, unsigned& out) {
  switch (type) {
    case GPUGATE_NVML_CLOCK_GRAPHICS: out = clocks.graphics; return true;
    case GPUGATE_NVML_CLOCK_SM: out = clocks.sm; return true;
    case GPUGATE_NVML_CLOCK_MEM: out = clocks.memory; return true;
    case GPUGATE_NVML_CLOCK_VIDEO: out = clocks.video; return true;
    default: return false;
  }
}

nvmlReturn_t clockInfo(int sym, nvmlDevice_t device, int type, unsigned int* clock, bool max) {
  return withDevice(sym, device, true, [&](Resolved& r) -> nvmlReturn_t {
    if (clock == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const Supported<SimClocks>& clocks = max ? r.device->maxClocksMHz : r.device->clocksMHz;
    if (!clocks.supported) return NVML_ERROR_NOT_SUPPORTED;
    unsigned value = 0;
    if (!clockOf(clocks.value, type, value)) return NVML_ERROR_INVALID_ARGUMENT;
    *clock = value;
    return NVML_SUCCESS;
  });
}

nvmlReturn_t powerLimit(int sym, nvmlDevice_t device, unsigned int* limit) {
  return withDevice(sym, device, true, [&](Resolved& r) {
    return answer(r.device->powerLimitWatts, limit, milliwatts(r.device->powerLimitWatts.value));
  });
}

nvmlReturn_t codecUtilization(int sym, nvmlDevice_t device, unsigned int* utilization, unsigned int* samplingPeriodUs, bool encoder) {
  return withDevice(sym, device, true, [&](Resolved& r) -> nvmlReturn_t {
    if (samplingPeriodUs == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const Supported<unsigned>& field = encoder ? r.device->encoderUtilization : r.device->decoderUtilization;
    nvmlReturn_t rc = answer(field, utilization, field.value);
    if (rc == NVML_SUCCESS) *samplingPeriodUs = 167000;  // the driver's sampling window
    return rc;
  });
}

nvmlReturn_t driverModel(int sym, nvmlDevice_t device, int* current, int* pending) {
  return withDevice(sym, device, true, [&](Resolved&) -> nvmlReturn_t {
    if (current == nullptr && pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_ERROR_NOT_SUPPORTED;  // WDDM / TCC are Windows driver models; Linux has none
  });
}

/** Fills one field value (nvmlFieldValue_t) for GPU `d`; `recoveryField`: the driver knows field 230. */
void fieldValue(const SimDevice& d, nvmlFieldValue_t& v, long long nowUs, bool recoveryField) {
  v.timestamp = nowUs;
  v.latencyUsec = 0;
  v.nvmlReturn = NVML_SUCCESS;
  switch (v.fieldId) {
    case GPUGATE_NVML_FI_DEV_POWER_INSTANT:
      if (!d.powerWatts.supported) break;
      v.valueType = GPUGATE_NVML_VALUE_TYPE_UNSIGNED_INT;
      v.value.asUInt = milliwatts(d.powerWatts.value);
      return;
    case GPUGATE_NVML_FI_DEV_GET_GPU_RECOVERY_ACTION:
      if (!recoveryField || !d.recoveryAction.supported) break;
      v.valueType = GPUGATE_NVML_VALUE_TYPE_UNSIGNED_INT;
      v.value.asUInt = d.recoveryAction.value;
      return;
    case GPUGATE_NVML_FI_DEV_NVLINK_LINK_COUNT:
      v.valueType = GPUGATE_NVML_VALUE_TYPE_UNSIGNED_INT;
      v.value.asUInt = d.nvlinkCount;
      return;
    default:
      if (v.fieldId >= GPUGATE_NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX && v.fieldId <= GPUGATE_NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX &&
          v.scopeId < d.nvlinkCount) {
        v.valueType = GPUGATE_NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
        v.value.asULongLong = 0;  // an idle link
        return;
      }
      break;
  }
  v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
}

}  // namespace

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int* speed) {
  return withDevice(kSym_nvmlDeviceGetFanSpeed, device, true, [&](Resolved& r) {
    return answer(r.device->fanSpeedPercent, speed, r.device->fanSpeedPercent.value);
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetNumFans(nvmlDevice_t device, unsigned int* numFans) {
  return withDevice(kSym_nvmlDeviceGetNumFans, device, true, [&](Resolved& r) -> nvmlReturn_t {
    if (numFans == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *numFans = r.device->fanSpeedPercent.supported ? 1 : 0;  // a passively cooled board has none
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int fan, unsigned int* speed) {
  return withDevice(kSym_nvmlDeviceGetFanSpeed_v2, device, true, [&](Resolved& r) -> nvmlReturn_t {
    if (speed == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r.device->fanSpeedPercent.supported) return NVML_ERROR_NOT_SUPPORTED;
    if (fan != 0) return NVML_ERROR_INVALID_ARGUMENT;
    *speed = r.device->fanSpeedPercent.value;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int* limit) {
  return powerLimit(kSym_nvmlDeviceGetPowerManagementLimit, device, limit);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* limit) {
  return powerLimit(kSym_nvmlDeviceGetEnforcedPowerLimit, device, limit);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int* clock) {
  return clockInfo(kSym_nvmlDeviceGetClockInfo, device, type, clock, false);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, int type, unsigned int* clock) {
  return clockInfo(kSym_nvmlDeviceGetMaxClockInfo, device, type, clock, true);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, int* pState) {
  return withDevice(kSym_nvmlDeviceGetPerformanceState, device, true, [&](Resolved& r) {
    return answer(r.device->performanceState, pState, static_cast<int>(r.device->performanceState.value));
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int errorType, int counterType,
                                                         unsigned long long* eccCounts) {
  return withDevice(kSym_nvmlDeviceGetTotalEccErrors, device, true, [&](Resolved& r) -> nvmlReturn_t {
    if (eccCounts == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (errorType != GPUGATE_NVML_MEMORY_ERROR_CORRECTED && errorType != GPUGATE_NVML_MEMORY_ERROR_UNCORRECTED) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (counterType != GPUGATE_NVML_VOLATILE_ECC && counterType != GPUGATE_NVML_AGGREGATE_ECC) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r.device->eccErrors.supported) return NVML_ERROR_NOT_SUPPORTED;
    // One count serves both counters: nothing was reset since the driver loaded.
    const SimEccErrors& e = r.device->eccErrors.value;
    *eccCounts = errorType == GPUGATE_NVML_MEMORY_ERROR_CORRECTED ? e.corrected : e.uncorrected;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int* utilization, unsigned int* samplingPeriodUs) {
  return codecUtilization(kSym_nvmlDeviceGetEncoderUtilization, device, utilization, samplingPeriodUs, true);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int* utilization, unsigned int* samplingPeriodUs) {
  return codecUtilization(kSym_nvmlDeviceGetDecoderUtilization, device, utilization, samplingPeriodUs, false);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, int* isActive) {
  return withDevice(kSym_nvmlDeviceGetDisplayActive, device, true, [&](Resolved& r) {
    return answer(r.device->displayActive, isActive, r.device->displayActive.value ? 1 : 0);
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device, int* display) {
  return withDevice(kSym_nvmlDeviceGetDisplayMode, device, true, [&](Resolved& r) {
    return answer(r.device->displayMode, display, r.device->displayMode.value ? 1 : 0);
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetDriverModel(nvmlDevice_t device, int* current, int* pending) {
  return driverModel(kSym_nvmlDeviceGetDriverModel, device, current, pending);
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, int counter, unsigned int* value) {
  return withDevice(kSym_nvmlDeviceGetPcieThroughput, device, true, [&](Resolved& r) -> nvmlReturn_t {
    if (value == nullptr || (counter != GPUGATE_NVML_PCIE_UTIL_TX_BYTES && counter != GPUGATE_NVML_PCIE_UTIL_RX_BYTES)) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (!r.device->pcieThroughputKBps.supported) return NVML_ERROR_NOT_SUPPORTED;
    const SimPcieThroughput& t = r.device->pcieThroughputKBps.value;
    *value = counter == GPUGATE_NVML_PCIE_UTIL_TX_BYTES ? t.txKBps : t.rxKBps;
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t* temperature) {
  return withDevice(kSym_nvmlDeviceGetTemperatureV, device, true, [&](Resolved& r) -> nvmlReturn_t {
    if (temperature == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (temperature->version != GPUGATE_NVML_TEMPERATURE_V1_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (temperature->sensorType != GPUGATE_NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r.device->temperatureC.supported) return NVML_ERROR_NOT_SUPPORTED;
    temperature->temperature = static_cast<int>(r.device->temperatureC.value);
    return NVML_SUCCESS;
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char* serial, unsigned int length) {
  return withDevice(kSym_nvmlDeviceGetSerial, device, true, [&](Resolved& r) -> nvmlReturn_t {
    if (serial == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!r.device->serial.supported) return NVML_ERROR_NOT_SUPPORTED;
    return copyString(r.device->serial.value, serial, length);
  });
}

GPUGATE_SIM_API nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t* values) {
  return withDevice(kSym_nvmlDeviceGetFieldValues, device, true, [&](Resolved& r) -> nvmlReturn_t {
    if (values == nullptr || valuesCount < 0) return NVML_ERROR_INVALID_ARGUMENT;
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long nowUs = static_cast<long long>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
    const bool recoveryField = driverHasRecoveryActionField(runtime().live.system.driverVersion.c_str());
    for (int i = 0; i < valuesCount; i++) fieldValue(*r.device, values[i], nowUs, recoveryField);
    return NVML_SUCCESS;
  });
}
