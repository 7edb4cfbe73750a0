// gpugate_sim_core as one translation unit: binding.gyp compiles this file, and this file is the list of
// the library's sources. Compiled one by one, each spent most of its time parsing the same
// standard headers; together they are parsed once, which takes about a third off a fresh clone's
// native build. Each source still compiles alone (the build suite checks it), so none may lean on
// an include of another; and as they share one unit, no two may define the same file-local name
// (a static function, a name in an unnamed namespace).

#include "exports_device.cc"
#include "exports_health.cc"
#include "exports_memory.cc"
#include "exports_mig.cc"
#include "exports_process.cc"
#include "exports_stubs.cc"
#include "exports_system.cc"
#include "exports_telemetry.cc"
#include "extras.cc"
#include "fault_actions.cc"
#include "gpu_models.cc"
#include "json.cc"
#include "lookup.cc"
#include "runtime.cc"
#include "scenario_reader.cc"
