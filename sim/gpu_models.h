// What a simulated GPU answers for the fields a scenario leaves out: power limit, clocks, BAR1,
// fan, NVLinks, serial, row remapping or page retirement, the PCIe link and fabric registration,
// chosen by the device's name so an A100 reads like an A100.
#pragma once

#include <cstdint>

#include "scenario.h"

namespace gpugate_sim {

/**
 * Fills every field of `d` whose bit is not in `given` (a DeviceFieldBits mask of the keys the
 * scenario wrote) with the default for the model named by d.name; `index` makes serials unique.
 */
void applyModelDefaults(SimDevice& d, uint64_t given, size_t index);

}  // namespace gpugate_sim
