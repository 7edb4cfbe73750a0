// The addon's entry point: the one table of names JavaScript sees.
//
// Every name here also appears in src/nvml/native-binding.ts (NATIVE_EXPORT_NAMES and the
// NativeBinding interface); test/nvml/native-contract.test.ts compares the two. The addon is
// context-aware (no global JavaScript state), so it loads in worker_threads too.
#include <napi.h>

#include "child_reap.h"
#include "introspection.h"
#include "lease_lock.h"
#include "notify.h"
#include "pidfd.h"
#include "session_api.h"
#include "signal_source.h"

namespace {

struct Export {
  const char* name;
  Napi::Value (*function)(const Napi::CallbackInfo&);
};

constexpr Export kExports[] = {
    {"createSession", gpugate::CreateSession},
    {"open", gpugate::OpenSession},
    {"snapshot", gpugate::Snapshot},
    {"snapshotSync", gpugate::SnapshotSync},
    {"readMemory", gpugate::ReadMemorySync},
    {"health", gpugate::Health},
    {"close", gpugate::CloseSession},
    {"abandon", gpugate::AbandonSession},
    {"currentCall", gpugate::CurrentCall},
    {"sendNotify", gpugate::SendNotify},
    {"pidfdOpen", gpugate::PidfdOpen},
    {"pidfdSendSignal", gpugate::PidfdSendSignal},
    {"reapChild", gpugate::ReapChild},
    {"flockExclusive", gpugate::FlockExclusive},
    {"watchSignalSource", gpugate::WatchSignalSource},
    {"lastSignalSource", gpugate::LastSignalSource},
    {"codeName", gpugate::CodeName},
    {"encodingLayout", gpugate::EncodingLayout},
    {"defaultLibraryCandidates", gpugate::DefaultLibraryCandidatesJs},
};

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  for (const Export& entry : kExports) {
    exports.Set(entry.name, Napi::Function::New(env, entry.function, entry.name));
  }
  return exports;
}

}  // namespace

NODE_API_MODULE(gpugate, Init)
