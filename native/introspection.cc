// Small read-only exports: code names, the wire layout by slot name, the library search list.
#include "introspection.h"

#include "errors.h"
#include "loader.h"
#include "wire_layout.h"

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
  for (const WireRecord& record : kWireRecords) {
    Napi::Array names = Napi::Array::New(env, record.count);
    for (size_t i = 0; i < record.count; ++i) names.Set(static_cast<uint32_t>(i), record.names[i].name);
    layout.Set(record.kind, names);
  }
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
