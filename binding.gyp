{
  "variables": {
    "gpugate_napi_version": "8"
  },
  "target_defaults": {
    "cflags_cc": ["-std=c++17", "-fvisibility=hidden", "-Wall", "-Wextra"],
    "cflags_cc!": ["-fno-exceptions", "-std=gnu++17"],
    "defines": ["NAPI_VERSION=<(gpugate_napi_version)"]
  },
  "targets": [
    {
      "target_name": "gpugate",
      "sources": ["native/addon.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_CPP_EXCEPTIONS", "NODE_ADDON_API_DISABLE_DEPRECATED"],
      "libraries": ["-ldl", "-lpthread"]
    },
    {
      "target_name": "gpugate_sim",
      "type": "shared_library",
      "sources": ["sim/sim.cc"],
      "libraries": ["-lpthread"]
    }
  ]
}
