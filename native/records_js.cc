// The records of a session as JavaScript values (see records_js.h).
#include "records_js.h"

#include <cmath>
#include <cstring>

namespace gpugate {

Napi::Value EncodedToJs(Napi::Env env, const EncodedSnapshot& encoded) {
  Napi::Float64Array numbers = Napi::Float64Array::New(env, encoded.numbers.size());
  if (!encoded.numbers.empty()) {
    std::memcpy(numbers.Data(), encoded.numbers.data(), encoded.numbers.size() * sizeof(double));
  }
  Napi::Array strings = Napi::Array::New(env, encoded.strings.size());
  for (size_t i = 0; i < encoded.strings.size(); ++i) strings.Set(static_cast<uint32_t>(i), encoded.strings[i]);
  Napi::Object result = Napi::Object::New(env);
  result.Set("numbers", numbers);
  result.Set("strings", strings);
  return result;
}

Napi::Value NullableString(Napi::Env env, const std::string& text) {
  return text.empty() ? env.Null() : Napi::String::New(env, text);
}

Napi::Object CallErrorToJs(Napi::Env env, const CallError& error) {
  Napi::Object object = Napi::Object::New(env);
  object.Set("field", error.field);
  object.Set("nvmlReturn", Napi::Number::New(env, error.code));
  object.Set("fn", error.symbol);
  object.Set("message", error.message);
  return object;
}

Napi::Object OpenResultToJs(Napi::Env env, const OpenedSession& opened) {
  Napi::Object result = Napi::Object::New(env);
  result.Set("path", opened.path);
  result.Set("driverVersion", NullableString(env, opened.versions.driverVersion));
  result.Set("nvmlVersion", NullableString(env, opened.versions.nvmlVersion));
  result.Set("cudaDriverVersion", opened.versions.cudaDriverVersion < 0
                                      ? env.Null()
                                      : Napi::Number::New(env, opened.versions.cudaDriverVersion));
  Napi::Object variants = Napi::Object::New(env);
  for (int fn = 0; fn < kFnCount; ++fn) {
    if (fn == kSimLastError) continue;
    const std::string& symbol = opened.boundSymbols.at(static_cast<size_t>(fn));
    variants.Set(LogicalName(static_cast<Fn>(fn)), symbol.empty() ? env.Null() : Napi::Value(Napi::String::New(env, symbol)));
  }
  result.Set("variants", variants);
  Napi::Array devices = Napi::Array::New(env, opened.identities.size());
  uint32_t position = 0;
  for (const DeviceIdentity& identity : opened.identities) {
    Napi::Object device = Napi::Object::New(env);
    device.Set("index", identity.index);
    device.Set("name", identity.name);
    device.Set("uuid", identity.uuid);
    device.Set("pciBusId", identity.pciBusId);
    device.Set("minorNumber", std::isnan(identity.minorNumber) ? env.Null() : Napi::Number::New(env, identity.minorNumber));
    if (identity.computeCapabilityMajor >= 0) {
      Napi::Array capability = Napi::Array::New(env, 2);
      capability.Set(0u, identity.computeCapabilityMajor);
      capability.Set(1u, identity.computeCapabilityMinor);
      device.Set("computeCapability", capability);
    } else {
      device.Set("computeCapability", env.Null());
    }
    device.Set("recoveryAction", std::isnan(identity.recoveryAction) ? env.Null() : Napi::Number::New(env, identity.recoveryAction));
    device.Set("error", identity.hasError ? Napi::Value(CallErrorToJs(env, identity.error)) : env.Null());
    Napi::Array fieldErrors = Napi::Array::New(env, identity.fieldErrors.size());
    for (size_t i = 0; i < identity.fieldErrors.size(); ++i) {
      fieldErrors.Set(static_cast<uint32_t>(i), CallErrorToJs(env, identity.fieldErrors[i]));
    }
    device.Set("fieldErrors", fieldErrors);
    devices.Set(position++, device);
  }
  result.Set("devices", devices);
  return result;
}

Napi::Error OpenFailureToJs(Napi::Env env, const OpenFailure& failure) {
  std::string message = failure.message;
  if (!failure.symbol.empty() && failure.kind == OpenFailure::kNvml) message = failure.symbol + " failed: " + message;
  Napi::Error error = Napi::Error::New(env, "gpugate: " + message);
  const char* kind = failure.kind == OpenFailure::kLibraryNotFound   ? "library"
                     : failure.kind == OpenFailure::kFunctionNotFound ? "function"
                                                                      : "nvml";
  error.Set("kind", kind);
  error.Set("nvmlReturn", Napi::Number::New(env, failure.code));
  error.Set("fn", failure.symbol.empty() ? env.Null() : Napi::Value(Napi::String::New(env, failure.symbol)));
  Napi::Array attempts = Napi::Array::New(env, failure.attempts.size());
  for (size_t i = 0; i < failure.attempts.size(); ++i) {
    Napi::Object attempt = Napi::Object::New(env);
    attempt.Set("path", failure.attempts[i].candidate);
    attempt.Set("error", failure.attempts[i].error);
    attempts.Set(static_cast<uint32_t>(i), attempt);
  }
  error.Set("attempts", attempts);
  error.Set("simulatorError", NullableString(env, failure.simulatorError));
  return error;
}

Napi::Value HealthToJs(Napi::Env env, const HealthReading& reading) {
  Napi::Object result = Napi::Object::New(env);
  result.Set("index", reading.index);
  Napi::Object fields = Napi::Object::New(env);
  for (const HealthField& field : reading.fields) {
    Napi::Object entry = Napi::Object::New(env);
    entry.Set("nvmlReturn", Napi::Number::New(env, field.code));
    entry.Set("fn", field.symbol);
    entry.Set("message", NullableString(env, field.message));
    Napi::Object values = Napi::Object::New(env);
    for (const auto& [name, value] : field.values) values.Set(name, Napi::Number::New(env, value));
    entry.Set("values", values);
    fields.Set(field.name, entry);
  }
  result.Set("fields", fields);
  return result;
}

}  // namespace gpugate
