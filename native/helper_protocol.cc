// Requests, replies and the helper's request handler (see helper_protocol.h).
#include "helper_protocol.h"

#include "byte_codec.h"
#include "wire_layout.h"

namespace gpugate {

namespace {

// --- records, each written and read side by side -------------------------------------------

void WriteCallError(ByteWriter& out, const CallError& error) {
  out.String(error.field);
  out.I32(error.code);
  out.String(error.symbol);
  out.String(error.message);
}
CallError ReadCallError(ByteReader& in) {
  CallError error;
  error.field = in.String();
  error.code = static_cast<nvmlReturn_t>(in.I32());
  error.symbol = in.String();
  error.message = in.String();
  return error;
}

void WriteIdentity(ByteWriter& out, const DeviceIdentity& identity) {
  out.U32(identity.index);
  out.U8(identity.hasError ? 1 : 0);
  WriteCallError(out, identity.error);
  out.String(identity.name);
  out.String(identity.uuid);
  out.String(identity.pciBusId);
  out.F64(identity.minorNumber);
  out.I32(identity.computeCapabilityMajor);
  out.I32(identity.computeCapabilityMinor);
  out.F64(identity.recoveryAction);
  out.U32(static_cast<uint32_t>(identity.fieldErrors.size()));
  for (const CallError& error : identity.fieldErrors) WriteCallError(out, error);
}
DeviceIdentity ReadIdentity(ByteReader& in) {
  DeviceIdentity identity;  // `handle` stays null: it is the helper's
  identity.index = in.U32();
  identity.hasError = in.U8() != 0;
  identity.error = ReadCallError(in);
  identity.name = in.String();
  identity.uuid = in.String();
  identity.pciBusId = in.String();
  identity.minorNumber = in.F64();
  identity.computeCapabilityMajor = in.I32();
  identity.computeCapabilityMinor = in.I32();
  identity.recoveryAction = in.F64();
  const uint32_t errors = in.U32();
  for (uint32_t i = 0; i < errors; ++i) identity.fieldErrors.push_back(ReadCallError(in));
  return identity;
}

void WriteOpened(ByteWriter& out, const OpenedSession& opened) {
  out.String(opened.path);
  out.String(opened.versions.driverVersion);
  out.String(opened.versions.nvmlVersion);
  out.I32(opened.versions.cudaDriverVersion);
  out.U32(static_cast<uint32_t>(opened.boundSymbols.size()));
  for (const std::string& symbol : opened.boundSymbols) out.String(symbol);
  out.U32(static_cast<uint32_t>(opened.identities.size()));
  for (const DeviceIdentity& identity : opened.identities) WriteIdentity(out, identity);
}
void ReadOpened(ByteReader& in, OpenedSession* opened) {
  opened->path = in.String();
  opened->versions.driverVersion = in.String();
  opened->versions.nvmlVersion = in.String();
  opened->versions.cudaDriverVersion = in.I32();
  const uint32_t symbols = in.U32();
  if (symbols != kFnCount) throw std::runtime_error("the NVML helper reports a different symbol table (not this build's helper)");
  for (uint32_t i = 0; i < symbols; ++i) opened->boundSymbols.push_back(in.String());
  const uint32_t devices = in.U32();
  for (uint32_t i = 0; i < devices; ++i) opened->identities.push_back(ReadIdentity(in));
}

void WriteOpenFailure(ByteWriter& out, const OpenFailure& failure) {
  out.U8(static_cast<uint8_t>(failure.kind));
  out.I32(failure.code);
  out.String(failure.symbol);
  out.String(failure.message);
  out.U32(static_cast<uint32_t>(failure.attempts.size()));
  for (const LoadAttempt& attempt : failure.attempts) {
    out.String(attempt.candidate);
    out.String(attempt.error);
  }
  out.String(failure.simulatorError);
}
OpenFailure ReadOpenFailure(ByteReader& in) {
  OpenFailure failure;
  failure.kind = static_cast<OpenFailure::Kind>(in.U8());
  failure.code = static_cast<nvmlReturn_t>(in.I32());
  failure.symbol = in.String();
  failure.message = in.String();
  const uint32_t attempts = in.U32();
  for (uint32_t i = 0; i < attempts; ++i) {
    LoadAttempt attempt;
    attempt.candidate = in.String();
    attempt.error = in.String();
    failure.attempts.push_back(attempt);
  }
  failure.simulatorError = in.String();
  return failure;
}

void WriteSnapshotRequest(ByteWriter& out, const SnapshotRequest& request) {
  out.U8(request.processes ? 1 : 0);
  out.U8(request.memoryOnly ? 1 : 0);
  out.U8(request.computeMode ? 1 : 0);
  out.U8(request.allDevices ? 1 : 0);
  out.U32(static_cast<uint32_t>(request.devices.size()));
  for (unsigned position : request.devices) out.U32(position);
}
SnapshotRequest ReadSnapshotRequest(ByteReader& in) {
  SnapshotRequest request;
  request.processes = in.U8() != 0;
  request.memoryOnly = in.U8() != 0;
  request.computeMode = in.U8() != 0;
  request.allDevices = in.U8() != 0;
  const uint32_t count = in.U32();
  for (uint32_t i = 0; i < count; ++i) request.devices.push_back(in.U32());
  return request;
}

void WriteEncoded(ByteWriter& out, const EncodedSnapshot& encoded) {
  out.Doubles(encoded.numbers.data(), encoded.numbers.size());
  out.U32(static_cast<uint32_t>(encoded.strings.size()));
  for (const std::string& text : encoded.strings) out.String(text);
}
void ReadEncoded(ByteReader& in, EncodedSnapshot* encoded) {
  in.Doubles(&encoded->numbers);
  const uint32_t count = in.U32();
  for (uint32_t i = 0; i < count; ++i) encoded->strings.push_back(in.String());
}

void WriteHealth(ByteWriter& out, const HealthReading& reading) {
  out.U32(reading.index);
  out.U32(static_cast<uint32_t>(reading.fields.size()));
  for (const HealthField& field : reading.fields) {
    out.String(field.name);
    out.I32(field.code);
    out.String(field.symbol);
    out.String(field.message);
    out.U32(static_cast<uint32_t>(field.values.size()));
    for (const auto& [name, value] : field.values) {
      out.String(name);
      out.F64(value);
    }
  }
}
HealthReading ReadHealthReading(ByteReader& in) {
  HealthReading reading;
  reading.index = in.U32();
  const uint32_t fields = in.U32();
  for (uint32_t i = 0; i < fields; ++i) {
    HealthField field;
    field.name = in.String();
    field.code = static_cast<nvmlReturn_t>(in.I32());
    field.symbol = in.String();
    field.message = in.String();
    const uint32_t values = in.U32();
    for (uint32_t v = 0; v < values; ++v) {
      std::string name = in.String();
      field.values.emplace_back(std::move(name), in.F64());
    }
    reading.fields.push_back(std::move(field));
  }
  return reading;
}

// --- frames ---------------------------------------------------------------------------------

std::string Request(RequestKind kind, ByteWriter&& body = ByteWriter()) {
  ByteWriter frame;
  frame.U8(static_cast<uint8_t>(kind));
  frame.Bytes().append(body.Bytes());
  return std::move(frame.Bytes());
}

// The reply's kind, checked: a refusal throws, anything but `expected` or kDone is garbled.
ByteReader OpenReply(const std::string& reply, ReplyKind* kind) {
  ByteReader in(reply.data(), reply.size());
  *kind = static_cast<ReplyKind>(in.U8());
  if (*kind == ReplyKind::kThrew || *kind == ReplyKind::kNotOpen) throw HelperRefusal(*kind, in.String());
  if (*kind != ReplyKind::kDone && *kind != ReplyKind::kOpenFailed) {
    throw std::runtime_error("the NVML helper sent a reply of unknown kind " + std::to_string(static_cast<int>(*kind)));
  }
  return in;
}

ByteReader DoneReply(const std::string& reply) {
  ReplyKind kind;
  ByteReader in = OpenReply(reply, &kind);
  if (kind != ReplyKind::kDone) throw std::runtime_error("the NVML helper answered a reading as if it were an open");
  return in;
}

void ExpectEnd(const ByteReader& in) {
  if (!in.AtEnd()) throw std::runtime_error("a frame from the NVML helper is longer than its content (garbled channel)");
}

std::string Answer(SessionCore& core, ByteReader& in, bool* shutdown) {
  ByteWriter out;
  const auto kind = static_cast<RequestKind>(in.U8());
  if (kind == RequestKind::kOpen) {
    const std::string path = in.String();
    const OpenFailure failure = core.Open(path);
    if (failure.kind != OpenFailure::kNone) {
      out.U8(static_cast<uint8_t>(ReplyKind::kOpenFailed));
      WriteOpenFailure(out, failure);
    } else {
      out.U8(static_cast<uint8_t>(ReplyKind::kDone));
      WriteOpened(out, core.Describe());
    }
    return std::move(out.Bytes());
  }
  if (kind == RequestKind::kShutdown) {
    core.Shutdown();
    *shutdown = true;
    out.U8(static_cast<uint8_t>(ReplyKind::kDone));
    return std::move(out.Bytes());
  }
  std::lock_guard<std::timed_mutex> lock(core.nvmlMutex);
  if (!core.Opened()) {
    out.U8(static_cast<uint8_t>(ReplyKind::kNotOpen));
    out.String("the NVML session is not open in the helper");
    return std::move(out.Bytes());
  }
  if (kind == RequestKind::kSnapshot) {
    const SnapshotRequest request = ReadSnapshotRequest(in);
    for (unsigned position : request.devices) {
      if (position >= core.DeviceCount()) throw std::runtime_error("a snapshot asked for a device the session does not have");
    }
    EncodedSnapshot encoded;
    core.ReadSnapshot(request, &encoded);
    out.U8(static_cast<uint8_t>(ReplyKind::kDone));
    WriteEncoded(out, encoded);
  } else if (kind == RequestKind::kHealth) {
    const uint32_t position = in.U32();
    if (position >= core.DeviceCount()) throw std::runtime_error("a health reading asked for a device the session does not have");
    out.U8(static_cast<uint8_t>(ReplyKind::kDone));
    WriteHealth(out, core.ReadDeviceHealth(position));
  } else if (kind == RequestKind::kReadMemory) {
    std::vector<double> memory(core.DeviceCount() * kMemorySlots);
    core.ReadAllMemory(memory.data());
    out.U8(static_cast<uint8_t>(ReplyKind::kDone));
    out.Doubles(memory.data(), memory.size());
  } else {
    throw std::runtime_error("unknown request kind " + std::to_string(static_cast<int>(kind)));
  }
  return std::move(out.Bytes());
}

}  // namespace

std::string EncodeOpenRequest(const std::string& libraryPath) {
  ByteWriter body;
  body.String(libraryPath);
  return Request(RequestKind::kOpen, std::move(body));
}

std::string EncodeSnapshotRequest(const SnapshotRequest& request) {
  ByteWriter body;
  WriteSnapshotRequest(body, request);
  return Request(RequestKind::kSnapshot, std::move(body));
}

std::string EncodeHealthRequest(uint32_t position) {
  ByteWriter body;
  body.U32(position);
  return Request(RequestKind::kHealth, std::move(body));
}

std::string EncodeReadMemoryRequest() { return Request(RequestKind::kReadMemory); }
std::string EncodeShutdownRequest() { return Request(RequestKind::kShutdown); }

std::string HandleRequest(SessionCore& core, const std::string& request, bool* shutdown) {
  try {
    ByteReader in(request.data(), request.size());
    return Answer(core, in, shutdown);
  } catch (const std::exception& error) {
    ByteWriter out;
    out.U8(static_cast<uint8_t>(ReplyKind::kThrew));
    out.String(error.what()[0] != '\0' ? error.what() : "a C++ exception");
    return std::move(out.Bytes());
  } catch (...) {
    ByteWriter out;
    out.U8(static_cast<uint8_t>(ReplyKind::kThrew));
    out.String("a C++ exception");
    return std::move(out.Bytes());
  }
}

OpenFailure DecodeOpenReply(const std::string& reply, OpenedSession* out) {
  ReplyKind kind;
  ByteReader in = OpenReply(reply, &kind);
  OpenFailure failure;
  if (kind == ReplyKind::kOpenFailed) {
    failure = ReadOpenFailure(in);
  } else {
    ReadOpened(in, out);
  }
  ExpectEnd(in);
  return failure;
}

void DecodeSnapshotReply(const std::string& reply, EncodedSnapshot* out) {
  ByteReader in = DoneReply(reply);
  ReadEncoded(in, out);
  ExpectEnd(in);
}

HealthReading DecodeHealthReply(const std::string& reply) {
  ByteReader in = DoneReply(reply);
  HealthReading reading = ReadHealthReading(in);
  ExpectEnd(in);
  return reading;
}

void DecodeMemoryReply(const std::string& reply, double* out, size_t slots) {
  ByteReader in = DoneReply(reply);
  std::vector<double> memory;
  in.Doubles(&memory);
  ExpectEnd(in);
  if (memory.size() != slots) throw std::runtime_error("the NVML helper sent memory for a different number of devices");
  std::copy(memory.begin(), memory.end(), out);
}

}  // namespace gpugate
