// The wire layout: every slot of the flat snapshot encoding and of readMemory's output, by name.
//
// A snapshot crosses into JavaScript as one vector of doubles (NaN = null) plus a string table;
// each record kind below is a fixed run of slots. The encoder (encode.cc, session.cc) writes by
// these positions; the addon exports the names in order (encodingLayout()), and the one decoder
// in TypeScript (src/nvml/wire-layout.ts, snapshot-decode.ts) resolves each name it reads to a
// position once, at load. So a slot can move or be added here without touching TypeScript; a slot
// that changes meaning gets a new name (a decoder reading the old name then refuses the addon).
//
// Records in one snapshot:
//   header:   once
//   device:   per device, then fieldErrorCount x error, processCount x process, and migCount x
//             (mig, then its processCount x process)
//   memory:   per device, readMemory()'s output (not part of a snapshot)
// A process's `kinds` slot is a bitmask: bit i set means processKinds[i]. The device record's
// per-figure slots come from the figure table (GPUGATE_DEVICE_FIGURES in readings.h).
#pragma once

#include <cstddef>
#include <iterator>

#include "readings.h"

namespace gpugate {

enum HeaderSlot : int {
  kHeaderDeviceCount,
  kHeaderSlots,
};

enum DeviceSlot : int {
  kDevIndex,
  kDevMemTotal,
  kDevMemFree,
  kDevMemUsed,
  kDevMemReserved,
  kDevMemSource,  // 2, 1, or NaN when memory could not be read
#define GPUGATE_FIGURE_SLOT(member, slot, wireName, query) slot,
  GPUGATE_DEVICE_FIGURES(GPUGATE_FIGURE_SLOT)
#undef GPUGATE_FIGURE_SLOT
  kDevErrorCode,  // NaN when the device has no device-level error
  kDevErrorSymbol,
  kDevErrorMessage,
  kDevFieldErrorCount,
  kDevProcessCount,  // NaN when the lists were not read (not asked for, or failed)
  kDevProcessSymbol,
  kDevProcessStride,
  kDevMigCount,  // NaN when the MIG devices were not listed
  kDeviceSlots,
};

enum MigSlot : int {
  kMigSlotIndex,
  kMigUuid,
  kMigGpuInstanceId,
  kMigComputeInstanceId,
  kMigMemTotal,
  kMigMemFree,
  kMigMemUsed,
  kMigMemReserved,
  kMigMemSource,
  kMigErrorCode,
  kMigErrorSymbol,
  kMigErrorMessage,
  kMigErrorField,
  kMigProcessCount,
  kMigProcessStride,
  kMigSlots,
};

enum ErrorSlot : int {
  kErrorField,
  kErrorCode,
  kErrorSymbol,
  kErrorMessage,
  kErrorSlots,
};

enum ProcessSlot : int {
  kProcessPid,
  kProcessUsedBytes,
  kProcessKinds,
  kProcessGpuInstanceId,
  kProcessComputeInstanceId,
  kProcessSlots,
};

enum MemorySlot : int {
  kMemoryTotal,
  kMemoryFree,
  kMemoryUsed,
  kMemoryReserved,  // NaN for v1 (unknown)
  kMemoryReturn,    // the nvmlReturn_t of the read (0 = ok)
  kMemorySlots,
};

struct SlotName {
  int slot;
  const char* name;
};

// String slots hold an index into the snapshot's string table.
inline constexpr SlotName kHeaderSlotNames[] = {
    {kHeaderDeviceCount, "deviceCount"},
};

inline constexpr SlotName kDeviceSlotNames[] = {
    {kDevIndex, "index"},
    {kDevMemTotal, "memTotal"},
    {kDevMemFree, "memFree"},
    {kDevMemUsed, "memUsed"},
    {kDevMemReserved, "memReserved"},
    {kDevMemSource, "memSource"},
#define GPUGATE_FIGURE_SLOT_NAME(member, slot, wireName, query) {slot, wireName},
    GPUGATE_DEVICE_FIGURES(GPUGATE_FIGURE_SLOT_NAME)
#undef GPUGATE_FIGURE_SLOT_NAME
    {kDevErrorCode, "errorCode"},
    {kDevErrorSymbol, "errorSymbol"},
    {kDevErrorMessage, "errorMessage"},
    {kDevFieldErrorCount, "fieldErrorCount"},
    {kDevProcessCount, "processCount"},
    {kDevProcessSymbol, "processSymbol"},
    {kDevProcessStride, "processStride"},
    {kDevMigCount, "migCount"},
};

inline constexpr SlotName kMigSlotNames[] = {
    {kMigSlotIndex, "slot"},
    {kMigUuid, "uuid"},
    {kMigGpuInstanceId, "gpuInstanceId"},
    {kMigComputeInstanceId, "computeInstanceId"},
    {kMigMemTotal, "memTotal"},
    {kMigMemFree, "memFree"},
    {kMigMemUsed, "memUsed"},
    {kMigMemReserved, "memReserved"},
    {kMigMemSource, "memSource"},
    {kMigErrorCode, "errorCode"},
    {kMigErrorSymbol, "errorSymbol"},
    {kMigErrorMessage, "errorMessage"},
    {kMigErrorField, "errorField"},
    {kMigProcessCount, "processCount"},
    {kMigProcessStride, "processStride"},
};

inline constexpr SlotName kErrorSlotNames[] = {
    {kErrorField, "field"},
    {kErrorCode, "nvmlReturn"},
    {kErrorSymbol, "symbol"},
    {kErrorMessage, "message"},
};

inline constexpr SlotName kProcessSlotNames[] = {
    {kProcessPid, "pid"},
    {kProcessUsedBytes, "usedBytes"},
    {kProcessKinds, "kinds"},
    {kProcessGpuInstanceId, "gpuInstanceId"},
    {kProcessComputeInstanceId, "computeInstanceId"},
};

inline constexpr SlotName kMemorySlotNames[] = {
    {kMemoryTotal, "totalBytes"},
    {kMemoryFree, "freeBytes"},
    {kMemoryUsed, "usedBytes"},
    {kMemoryReserved, "reservedBytes"},
    {kMemoryReturn, "nvmlReturn"},
};

// The process kinds by bit position (a "slot" here is the bit number).
inline constexpr SlotName kProcessKindNames[] = {
    {0, "compute"},
    {1, "graphics"},
    {2, "mps"},
};

struct WireRecord {
  const char* kind;
  const SlotName* names;
  size_t count;
};

inline constexpr WireRecord kWireRecords[] = {
    {"header", kHeaderSlotNames, std::size(kHeaderSlotNames)},
    {"device", kDeviceSlotNames, std::size(kDeviceSlotNames)},
    {"mig", kMigSlotNames, std::size(kMigSlotNames)},
    {"error", kErrorSlotNames, std::size(kErrorSlotNames)},
    {"process", kProcessSlotNames, std::size(kProcessSlotNames)},
    {"memory", kMemorySlotNames, std::size(kMemorySlotNames)},
    {"processKinds", kProcessKindNames, std::size(kProcessKindNames)},
};

// Every slot of a record named exactly once, in position order (so the exported order is the layout).
template <size_t N>
constexpr bool NamesEverySlotInOrder(const SlotName (&names)[N], int slots) {
  if (static_cast<int>(N) != slots) return false;
  for (size_t i = 0; i < N; ++i) {
    if (names[i].slot != static_cast<int>(i)) return false;
  }
  return true;
}

static_assert(NamesEverySlotInOrder(kHeaderSlotNames, kHeaderSlots), "header slot names");
static_assert(NamesEverySlotInOrder(kDeviceSlotNames, kDeviceSlots), "device slot names");
static_assert(NamesEverySlotInOrder(kMigSlotNames, kMigSlots), "mig slot names");
static_assert(NamesEverySlotInOrder(kErrorSlotNames, kErrorSlots), "error slot names");
static_assert(NamesEverySlotInOrder(kProcessSlotNames, kProcessSlots), "process slot names");
static_assert(NamesEverySlotInOrder(kMemorySlotNames, kMemorySlots), "memory slot names");
static_assert(NamesEverySlotInOrder(kProcessKindNames, 3), "process kind names");
static_assert(kKindCompute == 1u << 0 && kKindGraphics == 1u << 1 && kKindMps == 1u << 2, "process kind bits");

}  // namespace gpugate
