// Export markers for the simulator's C entry points.
//
// The library is built with -fvisibility=hidden; NVML symbols and the gpugateSim* extras are
// marked default-visible, and each library's linker version script (written from
// sim/driver_profiles.h) then keeps only the symbols of its driver profile in the dynamic symbol
// table: a symbol the profile lacks is not found by dlsym.
#pragma once

#define GPUGATE_SIM_API extern "C" __attribute__((visibility("default")))
