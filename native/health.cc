// Health readings of one GPU (see health.h).
#include "health.h"

#include <cstring>

#include "errors.h"

namespace gpugate {

namespace {

// Runs one query: `call` returns the NVML code and fills `field.values` on success.
template <typename Call>
HealthField Query(const SymbolTable& symbols, const char* name, Fn fn, Call&& call) {
  HealthField field;
  field.name = name;
  const char* bound = symbols.Symbol(fn);
  field.symbol = bound != nullptr ? bound : PreferredSymbol(fn);
  nvmlReturn_t code = symbols.Has(fn) ? call(field) : NVML_ERROR_FUNCTION_NOT_FOUND;
  if (code != NVML_SUCCESS) {
    field.values.clear();
    const CallError error = MakeCallError(symbols, name, fn, code);
    field.message = error.message;
  }
  field.code = code;
  return field;
}

HealthField UIntQuery(const SymbolTable& symbols, nvmlDevice_t device, const char* name, Fn fn) {
  return Query(symbols, name, fn, [&](HealthField& field) {
    unsigned value = 0;
    nvmlReturn_t code = symbols.Get<nvmlDeviceGetUInt_fn>(fn)(device, &value);
    if (code == NVML_SUCCESS) field.values = {{"value", value}};
    return code;
  });
}

}  // namespace

HealthReading ReadHealth(const SymbolTable& symbols, const DeviceIdentity& identity) {
  symbols.Reading(static_cast<int>(identity.index));
  HealthReading reading;
  reading.index = identity.index;
  nvmlDevice_t device = identity.handle;
  auto& fields = reading.fields;
  if (identity.hasError) {
    static const char* const names[] = {"migMode", "remappedRows", "volatileUncorrectedEcc", "retiredPagesPending",
                                        "clockEventReasons", "pcieGeneration", "pcieMaxGeneration", "pcieWidth",
                                        "pcieMaxWidth", "fabric"};
    for (const char* name : names) {
      HealthField field;
      field.name = name;
      field.code = identity.error.code;
      field.symbol = identity.error.symbol;
      field.message = identity.error.message;
      fields.push_back(field);
    }
    return reading;
  }
  fields.push_back(Query(symbols, "migMode", kDeviceGetMigMode, [&](HealthField& field) {
    unsigned current = 0, pending = 0;
    nvmlReturn_t code = symbols.Get<nvmlDeviceGetMigMode_fn>(kDeviceGetMigMode)(device, &current, &pending);
    if (code == NVML_SUCCESS) field.values = {{"current", current}, {"pending", pending}};
    return code;
  }));
  fields.push_back(Query(symbols, "remappedRows", kDeviceGetRemappedRows, [&](HealthField& field) {
    unsigned correctable = 0, uncorrectable = 0, pending = 0, failed = 0;
    nvmlReturn_t code = symbols.Get<nvmlDeviceGetRemappedRows_fn>(kDeviceGetRemappedRows)(device, &correctable, &uncorrectable,
                                                                                          &pending, &failed);
    if (code == NVML_SUCCESS) {
      field.values = {{"correctable", correctable}, {"uncorrectable", uncorrectable}, {"pending", pending}, {"failureOccurred", failed}};
    }
    return code;
  }));
  fields.push_back(Query(symbols, "volatileUncorrectedEcc", kDeviceGetTotalEccErrors, [&](HealthField& field) {
    unsigned long long count = 0;
    nvmlReturn_t code = symbols.Get<nvmlDeviceGetTotalEccErrors_fn>(kDeviceGetTotalEccErrors)(
        device, GPUGATE_NVML_MEMORY_ERROR_UNCORRECTED_TYPE, GPUGATE_NVML_VOLATILE_ECC_COUNTER, &count);
    if (code == NVML_SUCCESS) field.values = {{"count", static_cast<double>(count)}};
    return code;
  }));
  fields.push_back(Query(symbols, "retiredPagesPending", kDeviceGetRetiredPagesPendingStatus, [&](HealthField& field) {
    int pending = 0;
    nvmlReturn_t code = symbols.Get<nvmlDeviceGetRetiredPagesPendingStatus_fn>(kDeviceGetRetiredPagesPendingStatus)(device, &pending);
    if (code == NVML_SUCCESS) field.values = {{"pending", pending}};
    return code;
  }));
  fields.push_back(Query(symbols, "clockEventReasons", kDeviceGetClocksEventReasons, [&](HealthField& field) {
    unsigned long long reasons = 0;
    nvmlReturn_t code = symbols.Get<nvmlDeviceGetClocksEventReasons_fn>(kDeviceGetClocksEventReasons)(device, &reasons);
    // Two halves: a double holds 53 bits exactly, the mask has 64.
    if (code == NVML_SUCCESS) {
      field.values = {{"low", static_cast<double>(reasons & 0xFFFFFFFFull)}, {"high", static_cast<double>(reasons >> 32)}};
    }
    return code;
  }));
  fields.push_back(UIntQuery(symbols, device, "pcieGeneration", kDeviceGetCurrPcieLinkGeneration));
  fields.push_back(UIntQuery(symbols, device, "pcieMaxGeneration", kDeviceGetMaxPcieLinkGeneration));
  fields.push_back(UIntQuery(symbols, device, "pcieWidth", kDeviceGetCurrPcieLinkWidth));
  fields.push_back(UIntQuery(symbols, device, "pcieMaxWidth", kDeviceGetMaxPcieLinkWidth));
  fields.push_back(Query(symbols, "fabric", kDeviceGetGpuFabricInfo, [&](HealthField& field) {
    nvmlGpuFabricInfo_t info;
    std::memset(&info, 0, sizeof info);
    nvmlReturn_t code = symbols.Get<nvmlDeviceGetGpuFabricInfo_fn>(kDeviceGetGpuFabricInfo)(device, &info);
    if (code == NVML_SUCCESS) field.values = {{"state", info.state}, {"status", info.status}, {"cliqueId", info.cliqueId}};
    return code;
  }));
  return reading;
}

}  // namespace gpugate
