// Reads a scenario file (docs/scenarios.md) into the Scenario model, validating every key.
//
// Unknown keys, wrong types and out-of-range values are errors that name the file, the line
// and column of the offending value, and what was expected there. "comment" keys are allowed
// (and ignored) in every object so scenario files can explain themselves.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "fault_actions.h"
#include "gpu_models.h"
#include "json.h"
#include "scenario.h"
#include "symbols.h"

namespace gpugate_sim {

namespace {

using Kind = JsonValue::Kind;

struct ScenarioError {
  SourcePos pos;
  std::string message;
};

[[noreturn]] void fail(const SourcePos& pos, const std::string& message) { throw ScenarioError{pos, message}; }

// A key as JSON would write it: a member name can hold any character after unescaping ("\name" is a
// newline and "ame"), and an error line must stay one line that names it unambiguously.
std::string quoted(const std::string& key) {
  std::string out = "\"";
  for (unsigned char c : key) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

void expectKind(const JsonValue& v, Kind kind, const std::string& what) {
  if (v.kind != kind) fail(v.pos, std::string("expected ") + describeKind(kind) + " for " + what + ", found " + describeKind(v.kind));
}

/** Rejects keys not in `allowed` (a null-terminated list); "comment" is always allowed. */
void checkKeys(const JsonValue& obj, const char* const* allowed, const std::string& where) {
  for (const auto& m : obj.members) {
    if (m.key == "comment") continue;
    bool ok = false;
    for (const char* const* a = allowed; *a != nullptr; a++) {
      if (m.key == *a) {
        ok = true;
        break;
      }
    }
    if (!ok) {
      std::string list;
      for (const char* const* a = allowed; *a != nullptr; a++) {
        if (!list.empty()) list += ", ";
        list += *a;
      }
      fail(m.keyPos, "expected one of " + list + " in " + where + ", found unknown key " + quoted(m.key));
    }
  }
}

int64_t readInteger(const JsonValue& v, const std::string& key, int64_t min, int64_t max) {
  if (v.kind != Kind::Number || !v.isInteger) {
    fail(v.pos, "expected an integer for " + quoted(key) + ", found " +
                    (v.kind == Kind::Number ? std::string("a fractional number") : describeKind(v.kind)));
  }
  if (v.intValue < min || v.intValue > max) {
    fail(v.pos, "expected " + quoted(key) + " between " + std::to_string(min) + " and " + std::to_string(max) +
                    ", found " + std::to_string(v.intValue));
  }
  return v.intValue;
}

uint64_t readBytes(const JsonValue& v, const std::string& key) {
  if (v.kind != Kind::Number || !v.isInteger || v.intValue < 0) {
    fail(v.pos, "expected a non-negative integer number of bytes for " + quoted(key));
  }
  return static_cast<uint64_t>(v.intValue);
}

std::string readString(const JsonValue& v, const std::string& key, size_t maxLength) {
  if (v.kind != Kind::String) fail(v.pos, "expected a string for " + quoted(key) + ", found " + describeKind(v.kind));
  if (v.stringValue.size() > maxLength) {
    fail(v.pos, "expected " + quoted(key) + " of at most " + std::to_string(maxLength) + " bytes");
  }
  return v.stringValue;
}

bool readBool(const JsonValue& v, const std::string& key) {
  if (v.kind != Kind::Bool) fail(v.pos, "expected true or false for " + quoted(key) + ", found " + describeKind(v.kind));
  return v.boolValue;
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

/**
 * Parses a PCI bus id in NVML's forms ("00000000:1B:00.0", "0000:1B:00.0", "1B:00.0").
 * Shared with the by-bus-id handle lookup.
 */
bool parsePciBusId(const std::string& text, unsigned& domain, unsigned& bus, unsigned& device, unsigned& function) {
  // Split on ':' and '.' from the right: [domain:]bus:device.function
  size_t dot = text.rfind('.');
  if (dot == std::string::npos) return false;
  size_t c2 = text.rfind(':', dot);
  if (c2 == std::string::npos) return false;
  size_t c1 = c2 == 0 ? std::string::npos : text.rfind(':', c2 - 1);
  auto parseHex = [](const std::string& s, size_t maxDigits, unsigned& out) {
    if (s.empty() || s.size() > maxDigits) return false;
    unsigned v = 0;
    for (char c : s) {
      int d = hexDigit(c);
      if (d < 0) return false;
      v = v * 16 + static_cast<unsigned>(d);
    }
    out = v;
    return true;
  };
  std::string domainText = c1 == std::string::npos ? "0" : text.substr(0, c1);
  std::string busText = c1 == std::string::npos ? text.substr(0, c2) : text.substr(c1 + 1, c2 - c1 - 1);
  std::string deviceText = text.substr(c2 + 1, dot - c2 - 1);
  std::string functionText = text.substr(dot + 1);
  return parseHex(domainText, 8, domain) && parseHex(busText, 2, bus) && parseHex(deviceText, 2, device) &&
         device < 32 && parseHex(functionText, 1, function) && function < 8;
}

namespace {

std::string canonicalBusId(unsigned domain, unsigned bus, unsigned device, unsigned function) {
  char buf[32];
  snprintf(buf, sizeof buf, "%08X:%02X:%02X.%X", domain, bus, device, function);
  return buf;
}

/** A 32-bit PCI id: an integer, or a hex string such as "0x2BB510DE" (device id << 16 | vendor). */
uint32_t readId32(const JsonValue& v, const std::string& key) {
  if (v.kind == Kind::String) {
    const std::string& t = v.stringValue;
    bool ok = t.size() > 2 && t.size() <= 10 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X');
    uint32_t out = 0;
    for (size_t i = 2; ok && i < t.size(); i++) {
      int d = hexDigit(t[i]);
      if (d < 0) ok = false;
      else out = out * 16 + static_cast<uint32_t>(d);
    }
    if (!ok) fail(v.pos, "expected a hex string like \"0x2BB510DE\" or an integer for " + quoted(key));
    return out;
  }
  return static_cast<uint32_t>(readInteger(v, key, 0, 0xFFFFFFFFll));
}

const char* const kMemoryKeys[] = {"totalBytes", "reservedBytes", "usedBytes", "freeBytes", nullptr};

/** Reads a memory object; `mask` gets the kFieldMemory* bits of the keys present. */
void readMemory(const JsonValue& v, SimMemory& mem, uint64_t& mask, bool requireTotal) {
  expectKind(v, Kind::Object, quoted("memory"));
  checkKeys(v, kMemoryKeys, "\"memory\"");
  if (const JsonValue* t = v.find("totalBytes")) {
    mem.totalBytes = readBytes(*t, "totalBytes");
    mask |= kFieldMemoryTotal;
  } else if (requireTotal) {
    fail(v.pos, "expected \"totalBytes\" in \"memory\"");
  }
  if (const JsonValue* r = v.find("reservedBytes")) {
    mem.reservedBytes = readBytes(*r, "reservedBytes");
    mask |= kFieldMemoryReserved;
  }
  if (const JsonValue* u = v.find("usedBytes")) {
    mem.usedBytes = readBytes(*u, "usedBytes");
    mask |= kFieldMemoryUsed;
  }
  if (const JsonValue* f = v.find("freeBytes")) {
    // null returns to the derived figure; a number is reported as is, however implausible.
    mem.freeReported = f->kind != Kind::Null;
    mem.reportedFreeBytes = mem.freeReported ? readBytes(*f, "freeBytes") : 0;
    mask |= kFieldMemoryFree;
  }
  if (requireTotal && mem.reservedBytes + mem.usedBytes > mem.totalBytes) {
    fail(v.pos, "expected usedBytes + reservedBytes <= totalBytes in \"memory\"");
  }
}

const char* const kProcessKeys[] = {"pid", "spawn", "usedBytes", "kinds", "name", "gpuInstanceId", "computeInstanceId",
                                    "smUtilization", "memoryUtilization", nullptr};

std::vector<SimProcess> readProcesses(const JsonValue& v) {
  expectKind(v, Kind::Array, quoted("processes"));
  std::vector<SimProcess> out;
  for (const auto& item : v.items) {
    expectKind(*item, Kind::Object, "a process");
    checkKeys(*item, kProcessKeys, "a process");
    SimProcess p;
    const JsonValue* pid = item->find("pid");
    if (pid == nullptr && item->find("spawn") != nullptr) {
      fail(item->pos, "expected \"pid\" in a process: one with \"spawn\" gets its pid from `gpugate sim`, which starts "
                      "it (run the scenario through `gpugate sim`)");
    }
    if (pid == nullptr) fail(item->pos, "expected \"pid\" in a process");
    p.pid = static_cast<uint32_t>(readInteger(*pid, "pid", 0, 0xFFFFFFFFll));
    if (const JsonValue* u = item->find("usedBytes")) {
      if (u->kind == Kind::Null) p.usedKnown = false;
      else p.usedBytes = readBytes(*u, "usedBytes");
    }
    if (const JsonValue* k = item->find("kinds")) {
      expectKind(*k, Kind::Array, quoted("kinds"));
      if (k->items.empty()) fail(k->pos, "expected at least one of \"compute\", \"graphics\", \"mps\" in \"kinds\"");
      p.kinds = 0;
      for (const auto& kind : k->items) {
        if (kind->kind == Kind::String && kind->stringValue == "compute") p.kinds |= kKindCompute;
        else if (kind->kind == Kind::String && kind->stringValue == "graphics") p.kinds |= kKindGraphics;
        else if (kind->kind == Kind::String && kind->stringValue == "mps") p.kinds |= kKindMps;
        else fail(kind->pos, "expected \"compute\", \"graphics\" or \"mps\" in \"kinds\"");
      }
    }
    if (const JsonValue* n = item->find("name")) p.name = readString(*n, "name", 255);
    if (const JsonValue* x = item->find("smUtilization")) p.smUtilization = static_cast<unsigned>(readInteger(*x, "smUtilization", 0, 100));
    if (const JsonValue* x = item->find("memoryUtilization")) {
      p.memoryUtilization = static_cast<unsigned>(readInteger(*x, "memoryUtilization", 0, 100));
    }
    const JsonValue* gi = item->find("gpuInstanceId");
    const JsonValue* ci = item->find("computeInstanceId");
    if ((gi == nullptr) != (ci == nullptr)) {
      fail(item->pos, "expected both \"gpuInstanceId\" and \"computeInstanceId\" in a process, or neither");
    }
    if (gi != nullptr && ci != nullptr) {
      p.hasInstanceIds = true;
      p.gpuInstanceId = static_cast<uint32_t>(readInteger(*gi, "gpuInstanceId", 0, 0xFFFFFFFFll));
      p.computeInstanceId = static_cast<uint32_t>(readInteger(*ci, "computeInstanceId", 0, 0xFFFFFFFFll));
    }
    out.push_back(std::move(p));
  }
  return out;
}

const char* const kMigKeys[] = {"slot", "uuid", "name", "gpuInstanceId", "computeInstanceId", "memory", "processes", nullptr};

std::vector<SimMigDevice> readMigDevices(const JsonValue& v) {
  expectKind(v, Kind::Array, quoted("migDevices"));
  std::vector<SimMigDevice> out;
  for (const auto& item : v.items) {
    expectKind(*item, Kind::Object, "a MIG device");
    checkKeys(*item, kMigKeys, "a MIG device");
    SimMigDevice m;
    const JsonValue* slot = item->find("slot");
    if (slot == nullptr) fail(item->pos, "expected \"slot\" in a MIG device");
    m.slot = static_cast<int>(readInteger(*slot, "slot", 0, kMaxMigSlots - 1));
    for (const auto& other : out) {
      if (other.slot == m.slot) fail(slot->pos, "expected each MIG \"slot\" once, " + std::to_string(m.slot) + " appears twice");
    }
    const JsonValue* uuid = item->find("uuid");
    if (uuid == nullptr) fail(item->pos, "expected \"uuid\" in a MIG device");
    m.uuid = readString(*uuid, "uuid", 95);
    if (const JsonValue* n = item->find("name")) m.name = readString(*n, "name", 95);
    if (const JsonValue* gi = item->find("gpuInstanceId")) m.gpuInstanceId = static_cast<uint32_t>(readInteger(*gi, "gpuInstanceId", 0, 0xFFFFFFFEll));
    if (const JsonValue* ci = item->find("computeInstanceId")) m.computeInstanceId = static_cast<uint32_t>(readInteger(*ci, "computeInstanceId", 0, 0xFFFFFFFEll));
    const JsonValue* mem = item->find("memory");
    if (mem == nullptr) fail(item->pos, "expected \"memory\" in a MIG device");
    uint64_t ignored = 0;
    readMemory(*mem, m.memory, ignored, true);
    if (const JsonValue* procs = item->find("processes")) {
      m.processes = readProcesses(*procs);
      for (auto& p : m.processes) {
        if (!p.hasInstanceIds) {
          p.gpuInstanceId = m.gpuInstanceId;
          p.computeInstanceId = m.computeInstanceId;
          p.hasInstanceIds = true;
        }
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

// The device fields of a scenario, as one table (kDeviceFields below): each row names the JSON
// key, the mask bit a timeline `set` records for it, how its value is read and how a `set` copies
// it into a live device. The reader's key lists, its parsing and applyDevicePatch all come from
// the table, so a new device field is one row (plus its member in SimDevice and its bit).

/** Reads a field's JSON value `x` (under `key`) into `d`; only memory uses `mask` and `isBase`. */
using ReadField = void (*)(const JsonValue& x, const char* key, SimDevice& d, uint64_t& mask, bool isBase);
/** Copies a field from a timeline patch into a device. */
using MergeField = void (*)(SimDevice& target, const SimDevice& patch, uint64_t mask);

struct DeviceField {
  const char* key;
  uint64_t bit;        // recorded in the mask when the key is present (0: its reader records finer bits)
  uint64_t patchBits;  // a patch copies the field when its mask holds any of these
  ReadField read;
  MergeField merge;
  const char* missingInBase;  // the message when a scenario's device lacks the key; nullptr: optional
};

template <auto member>
void copyMember(SimDevice& target, const SimDevice& patch, uint64_t) {
  target.*member = patch.*member;
}

template <auto member, auto parse>
void readPlain(const JsonValue& x, const char* key, SimDevice& d, uint64_t&, bool) {
  parse(x, key, d.*member);
}

/** A value, or null for a field NVML answers NOT_SUPPORTED for. */
template <auto member, auto parse>
void readNullable(const JsonValue& x, const char* key, SimDevice& d, uint64_t&, bool) {
  auto& field = d.*member;
  field.supported = x.kind != Kind::Null;
  if (field.supported) parse(x, key, field.value);
}

/** A row for one member read by `parse` (a Supported<T> member takes null too). */
template <auto member, auto parse>
constexpr DeviceField plain(const char* key, uint64_t bit) {
  return {key, bit, bit, readPlain<member, parse>, copyMember<member>, nullptr};
}
template <auto member, auto parse>
constexpr DeviceField nullable(const char* key, uint64_t bit) {
  return {key, bit, bit, readNullable<member, parse>, copyMember<member>, nullptr};
}

// The value parsers: each reads `x`, names `key` in its message, and writes `out`.

void parseBool(const JsonValue& x, const char* key, bool& out) { out = readBool(x, key); }

template <int64_t max>
void parseUnsigned(const JsonValue& x, const char* key, unsigned& out) {
  out = static_cast<unsigned>(readInteger(x, key, 0, max));
}

template <size_t maxLength>
void parseString(const JsonValue& x, const char* key, std::string& out) {
  out = readString(x, key, maxLength);
}

void parseUuid(const JsonValue& x, const char* key, std::string& out) {
  out = readString(x, key, 95);
  if (out.empty()) fail(x.pos, "expected a non-empty " + quoted(key));
}

void parseId32(const JsonValue& x, const char* key, uint32_t& out) { out = readId32(x, key); }

void parseProcesses(const JsonValue& x, const char*, std::vector<SimProcess>& out) { out = readProcesses(x); }

void parseMigDevices(const JsonValue& x, const char*, std::vector<SimMigDevice>& out) { out = readMigDevices(x); }

void parsePowerWatts(const JsonValue& x, const char* key, double& out) {
  if (x.kind != Kind::Number || x.numberValue < 0 || x.numberValue > 100000) {
    fail(x.pos, "expected a number of watts between 0 and 100000 (or null) for " + quoted(key));
  }
  out = x.numberValue;
}

void parsePowerLimitWatts(const JsonValue& x, const char* key, double& out) {
  if (x.kind != Kind::Number || x.numberValue <= 0 || x.numberValue > 100000) {
    fail(x.pos, "expected a number of watts above 0 and at most 100000 (or null) for " + quoted(key));
  }
  out = x.numberValue;
}

void parseComputeMode(const JsonValue& x, const char* key, int& out) {
  static const char* const modes[] = {"default", "exclusive_thread", "prohibited", "exclusive_process"};
  int found = -1;
  if (x.kind == Kind::String) {
    for (int i = 0; i < 4; i++) {
      if (x.stringValue == modes[i]) found = i;
    }
  }
  if (found < 0) {
    fail(x.pos, "expected \"default\", \"exclusive_thread\", \"prohibited\", \"exclusive_process\" or null for " + quoted(key));
  }
  out = found;
}

void parseUtilization(const JsonValue& x, const char* key, SimUtilization& out) {
  expectKind(x, Kind::Object, quoted(key));
  static const char* const keys[] = {"gpu", "memory", nullptr};
  checkKeys(x, keys, quoted(key));
  if (const JsonValue* g = x.find("gpu")) out.gpu = static_cast<unsigned>(readInteger(*g, "gpu", 0, 100));
  if (const JsonValue* m = x.find("memory")) out.memory = static_cast<unsigned>(readInteger(*m, "memory", 0, 100));
}

/** A clocks object {graphics, sm, memory, video} in MHz; missing domains keep their value. */
void parseClocks(const JsonValue& x, const char* key, SimClocks& out) {
  expectKind(x, Kind::Object, quoted(key));
  static const char* const keys[] = {"graphics", "sm", "memory", "video", nullptr};
  checkKeys(x, keys, quoted(key));
  unsigned* fields[] = {&out.graphics, &out.sm, &out.memory, &out.video};
  for (int i = 0; i < 4; i++) {
    if (const JsonValue* c = x.find(keys[i])) *fields[i] = static_cast<unsigned>(readInteger(*c, keys[i], 0, 100000));
  }
}

void parseEccErrors(const JsonValue& x, const char* key, SimEccErrors& out) {
  expectKind(x, Kind::Object, quoted(key));
  static const char* const keys[] = {"corrected", "uncorrected", nullptr};
  checkKeys(x, keys, quoted(key));
  out = {};
  if (const JsonValue* c = x.find("corrected")) out.corrected = static_cast<uint64_t>(readInteger(*c, "corrected", 0, INT64_MAX));
  if (const JsonValue* u = x.find("uncorrected")) out.uncorrected = static_cast<uint64_t>(readInteger(*u, "uncorrected", 0, INT64_MAX));
}

void parsePcieThroughput(const JsonValue& x, const char* key, SimPcieThroughput& out) {
  expectKind(x, Kind::Object, quoted(key));
  static const char* const keys[] = {"tx", "rx", nullptr};
  checkKeys(x, keys, quoted(key));
  out = {};
  if (const JsonValue* t = x.find("tx")) out.txKBps = static_cast<unsigned>(readInteger(*t, "tx", 0, 0xFFFFFFFFll));
  if (const JsonValue* r = x.find("rx")) out.rxKBps = static_cast<unsigned>(readInteger(*r, "rx", 0, 0xFFFFFFFFll));
}

void parseBar1Memory(const JsonValue& x, const char* key, SimBar1& out) {
  expectKind(x, Kind::Object, quoted(key));
  static const char* const keys[] = {"totalBytes", "usedBytes", nullptr};
  checkKeys(x, keys, quoted(key));
  const JsonValue* t = x.find("totalBytes");
  if (t == nullptr) fail(x.pos, "expected \"totalBytes\" in " + quoted(key));
  out.totalBytes = readBytes(*t, "totalBytes");
  out.usedBytes = 0;
  if (const JsonValue* u = x.find("usedBytes")) out.usedBytes = readBytes(*u, "usedBytes");
  if (out.usedBytes > out.totalBytes) fail(x.pos, "expected usedBytes <= totalBytes in " + quoted(key));
}

void parseRemappedRows(const JsonValue& x, const char* key, SimRemappedRows& out) {
  expectKind(x, Kind::Object, quoted(key));
  static const char* const keys[] = {"correctable", "uncorrectable", "pending", "failureOccurred", nullptr};
  checkKeys(x, keys, quoted(key));
  out = {};
  if (const JsonValue* c = x.find("correctable")) out.correctable = static_cast<unsigned>(readInteger(*c, "correctable", 0, 0xFFFFFFFFll));
  if (const JsonValue* u = x.find("uncorrectable")) out.uncorrectable = static_cast<unsigned>(readInteger(*u, "uncorrectable", 0, 0xFFFFFFFFll));
  if (const JsonValue* p = x.find("pending")) out.pending = readBool(*p, "pending");
  if (const JsonValue* f = x.find("failureOccurred")) out.failureOccurred = readBool(*f, "failureOccurred");
}

/** The clock event reason names of a scenario, in nvmlClocksEventReasons bit order. */
const char* const kClockEventReasonNames[] = {"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
                                              "sync_boost", "sw_thermal_slowdown", "hw_thermal_slowdown",
                                              "hw_power_brake_slowdown", "display_clock_setting", nullptr};

void parseClockEventReasons(const JsonValue& x, const char* key, uint64_t& out) {
  expectKind(x, Kind::Array, quoted(key));
  uint64_t bits = 0;
  for (const auto& item : x.items) {
    int found = -1;
    for (int i = 0; kClockEventReasonNames[i] != nullptr; i++) {
      if (item->kind == Kind::String && item->stringValue == kClockEventReasonNames[i]) found = i;
    }
    if (found < 0) {
      std::string list;
      for (int i = 0; kClockEventReasonNames[i] != nullptr; i++) list += std::string(i == 0 ? "" : ", ") + kClockEventReasonNames[i];
      fail(item->pos, "expected one of " + list + " in " + quoted(key));
    }
    bits |= 1ull << found;
  }
  out = bits;
}

/** Link generation and width; a missing current figure is the maximum and the other way round. */
void parsePcieLink(const JsonValue& x, const char* key, SimPcieLink& l) {
  expectKind(x, Kind::Object, quoted(key));
  static const char* const keys[] = {"generation", "maxGeneration", "width", "maxWidth", nullptr};
  checkKeys(x, keys, quoted(key));
  if (const JsonValue* g = x.find("maxGeneration")) l.maxGeneration = static_cast<unsigned>(readInteger(*g, "maxGeneration", 1, 7));
  if (const JsonValue* w = x.find("maxWidth")) l.maxWidth = static_cast<unsigned>(readInteger(*w, "maxWidth", 1, 32));
  if (const JsonValue* g = x.find("generation")) l.generation = static_cast<unsigned>(readInteger(*g, "generation", 1, 7));
  if (const JsonValue* w = x.find("width")) l.width = static_cast<unsigned>(readInteger(*w, "width", 1, 32));
  if (l.maxGeneration == 0) l.maxGeneration = l.generation;
  if (l.maxWidth == 0) l.maxWidth = l.width;
  if (l.generation == 0) l.generation = l.maxGeneration;
  if (l.width == 0) l.width = l.maxWidth;
  if (l.generation == 0 || l.width == 0) {
    fail(x.pos, "expected \"generation\" or \"maxGeneration\", and \"width\" or \"maxWidth\", in " + quoted(key));
  }
  if (l.generation > l.maxGeneration || l.width > l.maxWidth) {
    fail(x.pos, "expected generation <= maxGeneration and width <= maxWidth in " + quoted(key));
  }
}

void parseFabric(const JsonValue& x, const char* key, SimFabric& out) {
  expectKind(x, Kind::Object, quoted(key));
  static const char* const keys[] = {"state", "status", "cliqueId", nullptr};
  checkKeys(x, keys, quoted(key));
  static const char* const states[] = {"not_supported", "not_started", "in_progress", "completed", nullptr};
  out = {3, 0, 0};
  if (const JsonValue* s = x.find("state")) {
    int found = -1;
    for (int i = 0; states[i] != nullptr; i++) {
      if (s->kind == Kind::String && s->stringValue == states[i]) found = i;
    }
    if (found < 0) fail(s->pos, "expected \"not_supported\", \"not_started\", \"in_progress\" or \"completed\" for \"state\" in " + quoted(key));
    out.state = static_cast<unsigned>(found);
  }
  if (const JsonValue* s = x.find("status")) out.status = static_cast<int>(readInteger(*s, "status", 0, 999));
  if (const JsonValue* c = x.find("cliqueId")) out.cliqueId = static_cast<unsigned>(readInteger(*c, "cliqueId", 0, 0xFFFFFFFFll));
}

/** The names of nvmlDeviceGpuRecoveryAction_t's values, in value order (0 none .. 4 drain and reset). */
const char* const kRecoveryActionNames[] = {"none", "gpu-reset", "node-reboot", "drain-p2p", "drain-and-reset", nullptr};

void parseRecoveryAction(const JsonValue& x, const char* key, unsigned& out) {
  int found = -1;
  for (int i = 0; kRecoveryActionNames[i] != nullptr; i++) {
    if (x.kind == Kind::String && x.stringValue == kRecoveryActionNames[i]) found = i;
  }
  if (found < 0) {
    fail(x.pos, "expected \"none\", \"gpu-reset\", \"node-reboot\", \"drain-p2p\", \"drain-and-reset\" or null for " + quoted(key));
  }
  out = static_cast<unsigned>(found);
}

// The fields whose value spans several members (or finer mask bits) read and copy by hand.

void readPciBusId(const JsonValue& x, const char* key, SimDevice& d, uint64_t&, bool) {
  std::string text = readString(x, key, 31);
  if (!parsePciBusId(text, d.pciDomain, d.pciBus, d.pciDevice, d.pciFunction)) {
    fail(x.pos, "expected a PCI bus id like \"00000000:1B:00.0\" for " + quoted(key));
  }
  d.pciBusId = canonicalBusId(d.pciDomain, d.pciBus, d.pciDevice, d.pciFunction);
}

void copyPciBusId(SimDevice& t, const SimDevice& p, uint64_t) {
  t.pciBusId = p.pciBusId;
  t.pciDomain = p.pciDomain;
  t.pciBus = p.pciBus;
  t.pciDevice = p.pciDevice;
  t.pciFunction = p.pciFunction;
}

void readComputeCapability(const JsonValue& x, const char* key, SimDevice& d, uint64_t&, bool) {
  if (x.kind != Kind::Array || x.items.size() != 2) fail(x.pos, "expected [major, minor] for " + quoted(key));
  d.ccMajor = static_cast<int>(readInteger(*x.items[0], key, 0, 99));
  d.ccMinor = static_cast<int>(readInteger(*x.items[1], key, 0, 99));
}

void copyComputeCapability(SimDevice& t, const SimDevice& p, uint64_t) {
  t.ccMajor = p.ccMajor;
  t.ccMinor = p.ccMinor;
}

void readDeviceMemory(const JsonValue& x, const char*, SimDevice& d, uint64_t& mask, bool isBase) {
  readMemory(x, d.memory, mask, isBase);
}

/** A `set` may change one memory figure and keep the others. */
void copyMemory(SimDevice& t, const SimDevice& p, uint64_t m) {
  if (m & kFieldMemoryTotal) t.memory.totalBytes = p.memory.totalBytes;
  if (m & kFieldMemoryReserved) t.memory.reservedBytes = p.memory.reservedBytes;
  if (m & kFieldMemoryUsed) t.memory.usedBytes = p.memory.usedBytes;
  if (m & kFieldMemoryFree) {
    t.memory.freeReported = p.memory.freeReported;
    t.memory.reportedFreeBytes = p.memory.reportedFreeBytes;
  }
}

void readMigModePending(const JsonValue& x, const char* key, SimDevice& d, uint64_t&, bool) {
  d.migModePendingSet = true;
  d.migModePending = readBool(x, key);
}

void copyMigModePending(SimDevice& t, const SimDevice& p, uint64_t) {
  t.migModePendingSet = p.migModePendingSet;
  t.migModePending = p.migModePending;
}

constexpr uint64_t kMemoryFieldBits = kFieldMemoryTotal | kFieldMemoryReserved | kFieldMemoryUsed | kFieldMemoryFree;

/**
 * Every device field, in the order the reader checks them (the first error in a file is the one
 * reported) and lists them in "expected one of" messages.
 */
constexpr DeviceField kDeviceFields[] = {
    plain<&SimDevice::name, &parseString<95>>("name", kFieldName),
    plain<&SimDevice::uuid, parseUuid>("uuid", kFieldUuid),
    {"pciBusId", kFieldPciBusId, kFieldPciBusId, readPciBusId, copyPciBusId, nullptr},
    plain<&SimDevice::pciDeviceId, parseId32>("pciDeviceId", kFieldPciDeviceId),
    plain<&SimDevice::pciSubSystemId, parseId32>("pciSubSystemId", kFieldPciSubSystemId),
    plain<&SimDevice::minorNumber, &parseUnsigned<255>>("minorNumber", kFieldMinorNumber),
    {"computeCapability", kFieldComputeCapability, kFieldComputeCapability, readComputeCapability, copyComputeCapability,
     nullptr},
    {"memory", 0, kMemoryFieldBits, readDeviceMemory, copyMemory, "expected \"memory\" (with \"totalBytes\") in a device"},
    nullable<&SimDevice::persistenceMode, parseBool>("persistenceMode", kFieldPersistenceMode),
    nullable<&SimDevice::computeMode, parseComputeMode>("computeMode", kFieldComputeMode),
    nullable<&SimDevice::migMode, parseBool>("migMode", kFieldMigMode),
    {"migModePending", kFieldMigModePending, kFieldMigModePending, readMigModePending, copyMigModePending, nullptr},
    plain<&SimDevice::maxMigDevices, &parseUnsigned<kMaxMigSlots>>("maxMigDevices", kFieldMaxMigDevices),
    nullable<&SimDevice::utilization, parseUtilization>("utilization", kFieldUtilization),
    nullable<&SimDevice::temperatureC, &parseUnsigned<200>>("temperatureC", kFieldTemperature),
    nullable<&SimDevice::powerWatts, parsePowerWatts>("powerWatts", kFieldPower),
    plain<&SimDevice::processes, parseProcesses>("processes", kFieldProcesses),
    plain<&SimDevice::migDevices, parseMigDevices>("migDevices", kFieldMigDevices),
    plain<&SimDevice::claimedProcessCount, &parseUnsigned<0xFFFFFFFFll>>("claimedProcessCount", kFieldClaimedProcessCount),
    nullable<&SimDevice::fanSpeedPercent, &parseUnsigned<100>>("fanSpeedPercent", kFieldFanSpeed),
    nullable<&SimDevice::powerLimitWatts, parsePowerLimitWatts>("powerLimitWatts", kFieldPowerLimit),
    nullable<&SimDevice::clocksMHz, parseClocks>("clocksMHz", kFieldClocks),
    nullable<&SimDevice::maxClocksMHz, parseClocks>("maxClocksMHz", kFieldMaxClocks),
    nullable<&SimDevice::performanceState, &parseUnsigned<15>>("performanceState", kFieldPerformanceState),
    nullable<&SimDevice::eccErrors, parseEccErrors>("eccErrors", kFieldEccErrors),
    nullable<&SimDevice::encoderUtilization, &parseUnsigned<100>>("encoderUtilization", kFieldEncoderUtilization),
    nullable<&SimDevice::decoderUtilization, &parseUnsigned<100>>("decoderUtilization", kFieldDecoderUtilization),
    nullable<&SimDevice::displayActive, parseBool>("displayActive", kFieldDisplayActive),
    nullable<&SimDevice::displayMode, parseBool>("displayMode", kFieldDisplayMode),
    nullable<&SimDevice::pcieThroughputKBps, parsePcieThroughput>("pcieThroughputKBps", kFieldPcieThroughput),
    nullable<&SimDevice::serial, &parseString<29>>("serial", kFieldSerial),
    nullable<&SimDevice::bar1Memory, parseBar1Memory>("bar1Memory", kFieldBar1Memory),
    plain<&SimDevice::nvlinkCount, &parseUnsigned<18>>("nvlinkCount", kFieldNvlinkCount),
    nullable<&SimDevice::remappedRows, parseRemappedRows>("remappedRows", kFieldRemappedRows),
    nullable<&SimDevice::retiredPagesPending, parseBool>("retiredPagesPending", kFieldRetiredPagesPending),
    nullable<&SimDevice::clockEventReasons, parseClockEventReasons>("clockEventReasons", kFieldClockEventReasons),
    nullable<&SimDevice::pcieLink, parsePcieLink>("pcieLink", kFieldPcieLink),
    nullable<&SimDevice::fabric, parseFabric>("fabric", kFieldFabric),
    nullable<&SimDevice::recoveryAction, parseRecoveryAction>("recoveryAction", kFieldRecoveryAction),
};

/** Every mask bit belongs to one field, so no `set` copies a field it did not give or misses one. */
constexpr bool EachBitOwnedOnce() {
  uint64_t seen = 0;
  for (const DeviceField& field : kDeviceFields) {
    if (field.patchBits == 0 || (seen & field.patchBits) != 0 || (field.bit & ~field.patchBits) != 0) return false;
    seen |= field.patchBits;
  }
  return true;
}
static_assert(EachBitOwnedOnce(), "kDeviceFields: each DeviceFieldBits bit in one row");

/** The keys a device may hold (with `extra` appended), null-terminated for checkKeys. */
std::vector<const char*> fieldKeys(const char* extra) {
  std::vector<const char*> keys;
  for (const DeviceField& field : kDeviceFields) keys.push_back(field.key);
  if (extra != nullptr) keys.push_back(extra);
  keys.push_back(nullptr);
  return keys;
}

const char* const* deviceKeys() {
  static const std::vector<const char*> keys = fieldKeys(nullptr);
  return keys.data();
}

/** A timeline `set` holds device fields and "faults". */
const char* const* setKeys() {
  static const std::vector<const char*> keys = fieldKeys("faults");
  return keys.data();
}

/** Reads device fields present in `v` into `d`, recording them in `mask`. */
void readDeviceFields(const JsonValue& v, SimDevice& d, uint64_t& mask, bool isBase) {
  for (const DeviceField& field : kDeviceFields) {
    if (const JsonValue* x = v.find(field.key)) {
      field.read(*x, field.key, d, mask, isBase);
      mask |= field.bit;
    } else if (isBase && field.missingInBase != nullptr) {
      fail(v.pos, field.missingInBase);
    }
  }
}

void checkMigSlots(const SimDevice& d, const JsonValue& where) {
  for (const auto& m : d.migDevices) {
    if (static_cast<uint32_t>(m.slot) >= d.maxMigDevices) {
      fail(where.pos, "expected every MIG \"slot\" below \"maxMigDevices\" (" + std::to_string(d.maxMigDevices) +
                          "), found slot " + std::to_string(m.slot));
    }
  }
}

const char* const kFaultKeys[] = {"function", "device",   "return",    "delayMs", "hang",    "kernelBlock",
                                  "crash",    "fromCall", "untilCall", "atMs",    "untilMs", nullptr};

/** "kernelBlock": the absolute path of the file the call writes to (PATH_MAX - 1 bytes at most). */
std::string readKernelBlockPath(const JsonValue& v) {
  std::string path = readString(v, "kernelBlock", 4095);
  if (path.empty() || path[0] != '/' || path.find('\0') != std::string::npos) {
    fail(v.pos, "expected an absolute file path for \"kernelBlock\", found " + quoted(path));
  }
  return path;
}

/** "crash": a signal name from the table in fault_actions.cc. */
int readCrashSignal(const JsonValue& v) {
  std::string name = readString(v, "crash", 200);
  int number = crashSignalNumber(name);
  if (number == 0) fail(v.pos, "expected one of " + crashSignalNames() + " for \"crash\", found " + quoted(name));
  return number;
}

std::vector<SimFault> readFaults(const JsonValue& v, size_t deviceCount, int profile) {
  expectKind(v, Kind::Array, quoted("faults"));
  std::vector<SimFault> out;
  for (const auto& item : v.items) {
    expectKind(*item, Kind::Object, "a fault");
    checkKeys(*item, kFaultKeys, "a fault");
    SimFault f;
    f.symbols.assign(kSymbolCount, false);
    const JsonValue* fn = item->find("function");
    if (fn == nullptr) fail(item->pos, "expected \"function\" (an NVML symbol name, a prefix ending in '*', or \"*\") in a fault");
    std::string name = readString(*fn, "function", 200);
    bool any = false;
    if (!name.empty() && name.back() == '*') {
      std::string prefix = name.substr(0, name.size() - 1);
      for (int s = 0; s < kSymbolCount; s++) {
        if (profileExports(profile, s) && strncmp(symbolName(s), prefix.c_str(), prefix.size()) == 0) {
          f.symbols[s] = true;
          any = true;
        }
      }
    } else {
      int s = symbolByName(name.c_str());
      if (profileExports(profile, s)) {
        f.symbols[s] = true;
        any = true;
      }
    }
    if (!any) {
      fail(fn->pos, std::string("expected an NVML symbol the simulator exports in the ") + profileName(profile) +
                        " driver profile (or a prefix ending in '*') for \"function\", found " + quoted(name));
    }
    if (const JsonValue* d = item->find("device")) {
      f.device = static_cast<int>(readInteger(*d, "device", 0, static_cast<int64_t>(deviceCount) - 1));
    }
    if (const JsonValue* r = item->find("return")) {
      f.hasReturn = true;
      f.returnCode = static_cast<int>(readInteger(*r, "return", INT32_MIN, INT32_MAX));
    }
    if (const JsonValue* d = item->find("delayMs")) f.delayMs = readInteger(*d, "delayMs", 0, 3600000);
    if (const JsonValue* h = item->find("hang")) f.hang = readBool(*h, "hang");
    if (const JsonValue* k = item->find("kernelBlock")) f.kernelBlock = readKernelBlockPath(*k);
    if (const JsonValue* c = item->find("crash")) f.crashSignal = readCrashSignal(*c);
    if (!f.hasReturn && f.delayMs == 0 && !f.hang && f.kernelBlock.empty() && f.crashSignal == 0) {
      fail(item->pos, "expected \"return\", \"delayMs\", \"hang\": true, \"kernelBlock\" or \"crash\" in a fault");
    }
    if (const JsonValue* x = item->find("fromCall")) f.fromCall = readInteger(*x, "fromCall", 0, INT64_MAX);
    if (const JsonValue* x = item->find("untilCall")) f.untilCall = readInteger(*x, "untilCall", 0, INT64_MAX);
    if (const JsonValue* x = item->find("atMs")) f.atMs = readInteger(*x, "atMs", 0, INT64_MAX / 1000000);
    if (const JsonValue* x = item->find("untilMs")) f.untilMs = readInteger(*x, "untilMs", 0, INT64_MAX / 1000000);
    out.push_back(std::move(f));
  }
  return out;
}

const char* const kTimelineKeys[] = {"atMs", "atCall", "function", "device", "set", nullptr};

SimTimelineEntry readTimelineEntry(const JsonValue& v, const std::vector<SimDevice>& devices, int profile) {
  expectKind(v, Kind::Object, "a timeline entry");
  checkKeys(v, kTimelineKeys, "a timeline entry");
  SimTimelineEntry e;
  const JsonValue* atMs = v.find("atMs");
  const JsonValue* atCall = v.find("atCall");
  if ((atMs == nullptr) == (atCall == nullptr)) fail(v.pos, "expected exactly one of \"atMs\" or \"atCall\" in a timeline entry");
  if (atMs != nullptr) {
    e.at = readInteger(*atMs, "atMs", 0, INT64_MAX / 1000000);
  } else {
    e.byCall = true;
    e.at = readInteger(*atCall, "atCall", 0, INT64_MAX);
  }
  if (const JsonValue* fn = v.find("function")) {
    if (!e.byCall) fail(fn->pos, "expected \"function\" only with \"atCall\" (it names the function whose calls are counted)");
    std::string name = readString(*fn, "function", 200);
    e.function = symbolByName(name.c_str());
    if (!profileExports(profile, e.function)) {
      fail(fn->pos, std::string("expected an NVML symbol the simulator exports in the ") + profileName(profile) +
                        " driver profile for \"function\", found " + quoted(name));
    }
  }
  const JsonValue* set = v.find("set");
  if (set == nullptr) fail(v.pos, "expected \"set\" (the changes to apply) in a timeline entry");
  expectKind(*set, Kind::Object, quoted("set"));
  checkKeys(*set, setKeys(), "\"set\"");
  readDeviceFields(*set, e.patch, e.mask, false);
  if (const JsonValue* faults = set->find("faults")) {
    e.setsFaults = true;
    e.faults = readFaults(*faults, devices.size(), profile);
  }
  const JsonValue* device = v.find("device");
  if (e.mask != 0 && device == nullptr) {
    fail(v.pos, "expected \"device\" (an index or \"all\") in a timeline entry that changes device fields");
  }
  if (device == nullptr) {
    e.device = -2;
  } else if (device->kind == Kind::String && device->stringValue == "all") {
    e.device = -1;
  } else if (device->kind == Kind::Number && device->isInteger && device->intValue >= 0 &&
             device->intValue < static_cast<int64_t>(devices.size())) {
    e.device = static_cast<int>(device->intValue);
  } else {
    fail(device->pos, "expected a device index below " + std::to_string(devices.size()) + " or \"all\" for \"device\"");
  }
  if (e.mask & kFieldMigDevices) checkMigSlots(e.patch, *set);
  return e;
}

const char* const kTopKeys[] = {"system", "startedAt", "devices", "timeline", "faults", nullptr};
const char* const kSystemKeys[] = {"driverVersion", "driverProfile", "nvmlVersion", "cudaDriverVersion",
                                   "memoryV2UsedIncludesReserved", nullptr};

std::string profileList() {
  std::string list;
  for (int p = 0; p < kProfileCount; p++) {
    if (!list.empty()) list += ", ";
    list += quoted(profileName(p));
  }
  return list;
}

void readSystem(const JsonValue* sys, SimSystem& system) {
  const JsonValue* profile = nullptr;
  const JsonValue* version = nullptr;
  if (sys != nullptr) {
    expectKind(*sys, Kind::Object, quoted("system"));
    checkKeys(*sys, kSystemKeys, "\"system\"");
    if ((version = sys->find("driverVersion")) != nullptr) system.driverVersion = readString(*version, "driverVersion", 79);
    if (const JsonValue* x = sys->find("nvmlVersion")) system.nvmlVersion = readString(*x, "nvmlVersion", 79);
    if (const JsonValue* x = sys->find("cudaDriverVersion")) {
      system.cudaDriverVersion = static_cast<int>(readInteger(*x, "cudaDriverVersion", 0, 1000000));
    }
    if (const JsonValue* x = sys->find("memoryV2UsedIncludesReserved")) {
      system.memoryV2UsedIncludesReserved = readBool(*x, "memoryV2UsedIncludesReserved");
    }
    profile = sys->find("driverProfile");
    // A driver version alone brings its branch's NVML and CUDA versions, as a real driver reports them.
    int cuda = version != nullptr ? cudaDriverVersionFor(system.driverVersion.c_str()) : 0;
    if (cuda != 0 && sys->find("cudaDriverVersion") == nullptr) system.cudaDriverVersion = cuda;
    if (cuda != 0 && sys->find("nvmlVersion") == nullptr) system.nvmlVersion = std::to_string(cuda / 1000) + "." + system.driverVersion;
  }
  const JsonValue* decided = profile != nullptr ? profile : version != nullptr ? version : sys;
  if (decided != nullptr) {
    system.profileLine = decided->pos.line;
    system.profileColumn = decided->pos.column;
  }
  if (profile != nullptr) {
    system.profile = profileByName(readString(*profile, "driverProfile", 40).c_str());
    if (system.profile < 0) fail(profile->pos, "expected one of " + profileList() + " for \"driverProfile\"");
    return;
  }
  system.profile = profileForDriverVersion(system.driverVersion.c_str());
  if (system.profile < 0) {
    fail(version != nullptr ? version->pos : sys->pos,
         "expected a driver version starting MAJOR.MINOR (e.g. \"535.54.03\") for \"driverVersion\", or a \"driverProfile\"");
  }
}

SimClockAnchor readStartedAt(const JsonValue& v) {
  SimClockAnchor anchor;
  if (v.kind == Kind::Number && v.isInteger && v.intValue >= 0 && v.intValue < INT64_MAX / 1000000) {
    anchor.kind = SimClockAnchor::Kind::WallClock;
    anchor.unixNs = v.intValue * 1000000;
    return anchor;
  }
  if (v.kind == Kind::String && parseClockAnchor(v.stringValue, anchor)) return anchor;
  fail(v.pos, "expected Unix milliseconds, an ISO 8601 UTC time like \"2026-12-01T09:00:00Z\", or \"init\" for \"startedAt\"");
}

void readScenarioValue(const JsonValue& root, Scenario& s) {
  expectKind(root, Kind::Object, "the scenario (the top level)");
  checkKeys(root, kTopKeys, "the top level");
  readSystem(root.find("system"), s.system);
  if (const JsonValue* x = root.find("startedAt")) s.startedAt = readStartedAt(*x);
  const JsonValue* devices = root.find("devices");
  if (devices == nullptr) fail(root.pos, "expected \"devices\" (an array of GPUs) at the top level");
  expectKind(*devices, Kind::Array, quoted("devices"));
  if (devices->items.size() > static_cast<size_t>(kMaxDevices)) {
    fail(devices->pos, "expected at most " + std::to_string(kMaxDevices) + " devices");
  }
  for (size_t i = 0; i < devices->items.size(); i++) {
    const JsonValue& dv = *devices->items[i];
    expectKind(dv, Kind::Object, "a device");
    checkKeys(dv, deviceKeys(), "a device");
    SimDevice d;
    d.name = "NVIDIA RTX PRO 6000 Blackwell Server Edition";
    char buf[64];
    snprintf(buf, sizeof buf, "GPU-5a1e0000-0000-4000-8000-%012zx", i);
    d.uuid = buf;
    d.pciBus = static_cast<unsigned>(i + 1);
    d.pciBusId = canonicalBusId(0, d.pciBus, 0, 0);
    d.minorNumber = static_cast<uint32_t>(i);
    // The model's defaults first (they depend on the name), then whatever the scenario gives.
    if (const JsonValue* n = dv.find("name")) d.name = readString(*n, "name", 95);
    applyModelDefaults(d, 0, i);
    uint64_t mask = 0;
    readDeviceFields(dv, d, mask, true);
    checkMigSlots(d, dv);
    s.devices.push_back(std::move(d));
  }
  if (const JsonValue* faults = root.find("faults")) s.faults = readFaults(*faults, s.devices.size(), s.system.profile);
  if (const JsonValue* timeline = root.find("timeline")) {
    expectKind(*timeline, Kind::Array, quoted("timeline"));
    for (const auto& item : timeline->items) s.timeline.push_back(readTimelineEntry(*item, s.devices, s.system.profile));
  }
}

}  // namespace

void applyDevicePatch(SimDevice& target, const SimDevice& patch, uint64_t mask) {
  for (const DeviceField& field : kDeviceFields) {
    if (mask & field.patchBits) field.merge(target, patch, mask);
  }
}

bool parseClockAnchor(const std::string& text, SimClockAnchor& out) {
  if (text == "init") {
    out.kind = SimClockAnchor::Kind::PerReader;
    return true;
  }
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos && text.size() <= 15) {
    out.kind = SimClockAnchor::Kind::WallClock;
    out.unixNs = std::stoll(text) * 1000000;
    return true;
  }
  // YYYY-MM-DDTHH:MM:SS[.fraction]Z
  int year, month, day, hour, minute, second, used = 0;
  if (sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &year, &month, &day, &hour, &minute, &second, &used) != 6 || used != 19) {
    return false;
  }
  int64_t fractionNs = 0;
  size_t at = 19;
  if (at < text.size() && text[at] == '.') {
    int64_t scale = 100000000;
    for (at++; at < text.size() && text[at] >= '0' && text[at] <= '9'; at++, scale /= 10) fractionNs += (text[at] - '0') * scale;
  }
  if (at + 1 != text.size() || text[at] != 'Z') return false;
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60 || year < 1970) return false;
  // Days from the civil date (proleptic Gregorian), so no time zone database is involved.
  int y = year - (month <= 2 ? 1 : 0);
  int era = y / 400;
  int yoe = y - era * 400;
  int doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  int64_t days = static_cast<int64_t>(era) * 146097 + doe - 719468;
  out.kind = SimClockAnchor::Kind::WallClock;
  out.unixNs = ((days * 86400 + hour * 3600 + minute * 60 + second) * 1000000000) + fractionNs;
  return true;
}

bool readScenarioText(const std::string& path, const std::string& text, Scenario& out, std::string& error) {
  JsonError jsonError;
  auto root = parseJson(text, jsonError);
  if (!root) {
    error = path + ":" + std::to_string(jsonError.pos.line) + ":" + std::to_string(jsonError.pos.column) + ": " +
            jsonError.message;
    return false;
  }
  try {
    Scenario s;
    readScenarioValue(*root, s);
    out = std::move(s);
    return true;
  } catch (const ScenarioError& e) {
    error = path + ":" + std::to_string(e.pos.line) + ":" + std::to_string(e.pos.column) + ": " + e.message;
    return false;
  } catch (const std::exception& e) {
    error = path + ": cannot read the scenario (" + e.what() + ")";
    return false;
  }
}

bool readScenarioFile(const std::string& path, Scenario& out, std::string& error) {
  FILE* f = fopen(path.c_str(), "rb");
  if (f == nullptr) {
    error = path + ": cannot open the scenario file (" + strerror(errno) + "); expected a readable JSON file";
    return false;
  }
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
    text.append(buf, n);
    if (text.size() > (64u << 20)) {
      fclose(f);
      error = path + ": expected a scenario file under 64 MiB";
      return false;
    }
  }
  fclose(f);
  return readScenarioText(path, text, out, error);
}

}  // namespace gpugate_sim
