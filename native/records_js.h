// A session's records as JavaScript values: the flat snapshot encoding, the open result and its
// failure, a device's health readings. Built on the JavaScript thread from the records that both
// places NVML runs in produce (session.h, encode.h, health.h), so the two modes and the worker and
// direct paths hand JavaScript the same shapes.
#pragma once

#include <napi.h>

#include <string>

#include "encode.h"
#include "health.h"
#include "session.h"

namespace gpugate {

Napi::Value EncodedToJs(Napi::Env env, const EncodedSnapshot& encoded);
// null for an empty string.
Napi::Value NullableString(Napi::Env env, const std::string& text);
Napi::Object CallErrorToJs(Napi::Env env, const CallError& error);
Napi::Object OpenResultToJs(Napi::Env env, const OpenedSession& opened);
Napi::Error OpenFailureToJs(Napi::Env env, const OpenFailure& failure);
Napi::Value HealthToJs(Napi::Env env, const HealthReading& reading);

}  // namespace gpugate
