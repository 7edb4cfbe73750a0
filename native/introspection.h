// Small read-only exports that let TypeScript and the tests check the native side's constants:
// the NVML code-name table, the wire layout (each record kind's slot names in order, wire_layout.h),
// the default library search list.
#pragma once

#include <napi.h>

namespace gpugate {

Napi::Value CodeName(const Napi::CallbackInfo& info);
Napi::Value EncodingLayout(const Napi::CallbackInfo& info);
Napi::Value DefaultLibraryCandidatesJs(const Napi::CallbackInfo& info);

}  // namespace gpugate
