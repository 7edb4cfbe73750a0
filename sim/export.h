// Export markers for the simulator's C entry points.
//
// The library is built with -fvisibility=hidden; only NVML symbols and the gpugateSim* extras
// are marked default-visible. The legacy variant (GPUGATE_SIM_LEGACY, standing in for an old
// driver) compiles the _v2/_v3 entry points out entirely, so dlsym finds none of them.
#pragma once

#define GPUGATE_SIM_API extern "C" __attribute__((visibility("default")))
