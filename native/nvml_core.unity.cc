// gpugate_nvml_core as one translation unit: binding.gyp compiles this file, and this file is the list of
// the library's sources. Compiled one by one, each spent most of its time parsing the same
// standard headers; together they are parsed once, which takes about a third off a fresh clone's
// native build. Each source still compiles alone (the build suite checks it), so none may lean on
// an include of another; and as they share one unit, no two may define the same file-local name
// (a static function, a name in an unnamed namespace).

#include "encode.cc"
#include "errors.cc"
#include "frame_io.cc"
#include "health.cc"
#include "helper_protocol.cc"
#include "loader.cc"
#include "process_list.cc"
#include "queries.cc"
#include "session.cc"
#include "symbols.cc"
