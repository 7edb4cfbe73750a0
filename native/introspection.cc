// Small read-only exports: code names, the encoding layout, the library search list.
#include "introspection.h"

#include "encode.h"
#include "errors.h"
#include "loader.h"
#include "session.h"

namespace gpugate {

Napi::Value CodeName(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber()) {
    throw Napi::TypeError::New(env, "gpugate: argument 'code' must be an nvmlReturn_t number");
  }
  return Napi::String::New(env, NvmlCodeName(info[0].As<Napi::Number>().Int32Value()));
}

Napi::Value EncodingLayout(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object layout = Napi::Object::New(env);
  layout.Set("version", kEncodingVersion);
  layout.Set("headerSlots", kHeaderSlots);
  layout.Set("deviceSlots", static_cast<int>(kDeviceSlots));
  layout.Set("migSlots", static_cast<int>(kMigSlots));
  layout.Set("errorSlots", kErrorSlots);
  layout.Set("processSlots", kProcessSlots);
  layout.Set("memorySlots", kMemorySlots);
  return layout;
}

Napi::Value DefaultLibraryCandidatesJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::vector<std::string> candidates = DefaultLibraryCandidates();
  Napi::Array array = Napi::Array::New(env, candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) array.Set(static_cast<uint32_t>(i), candidates[i]);
  return array;
}

}  // namespace gpugate
