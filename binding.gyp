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
      "sources": [
        "native/addon.cc",
        "native/encode.cc",
        "native/errors.cc",
        "native/introspection.cc",
        "native/loader.cc",
        "native/notify.cc",
        "native/process_list.cc",
        "native/queries.cc",
        "native/session.cc",
        "native/session_api.cc",
        "native/symbols.cc",
        "native/worker.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_CPP_EXCEPTIONS", "NODE_ADDON_API_CPP_EXCEPTIONS_ALL", "NODE_ADDON_API_DISABLE_DEPRECATED"],
      "libraries": ["-ldl", "-lpthread"]
    },
    {
      "target_name": "gpugate_sim",
      "type": "shared_library",
      "sources": [
        "sim/exports_device.cc",
        "sim/exports_memory.cc",
        "sim/exports_mig.cc",
        "sim/exports_process.cc",
        "sim/exports_system.cc",
        "sim/extras.cc",
        "sim/json.cc",
        "sim/lookup.cc",
        "sim/runtime.cc",
        "sim/scenario_reader.cc",
        "sim/symbols.cc"
      ],
      "ldflags": ["-Xlinker", "--version-script", "-Xlinker", "<!(node -p \"require('path').resolve('sim/exports.map')\")"],
      "libraries": ["-lpthread"]
    },
    {
      "target_name": "gpugate_sim_legacy",
      "type": "shared_library",
      "sources": [
        "sim/exports_device.cc",
        "sim/exports_memory.cc",
        "sim/exports_mig.cc",
        "sim/exports_process.cc",
        "sim/exports_system.cc",
        "sim/extras.cc",
        "sim/json.cc",
        "sim/lookup.cc",
        "sim/runtime.cc",
        "sim/scenario_reader.cc",
        "sim/symbols.cc"
      ],
      "defines": ["GPUGATE_SIM_LEGACY"],
      "ldflags": ["-Xlinker", "--version-script", "-Xlinker", "<!(node -p \"require('path').resolve('sim/exports.map')\")"],
      "libraries": ["-lpthread"]
    },
    {
      "target_name": "gpugate_sim_nvml_name",
      "type": "none",
      "dependencies": ["gpugate_sim"],
      "actions": [
        {
          "action_name": "install_sim_as_libnvidia_ml",
          "inputs": ["<(PRODUCT_DIR)/gpugate_sim.so"],
          "outputs": ["<(PRODUCT_DIR)/sim/libnvidia-ml.so.1"],
          "action": ["sh", "-c", "mkdir -p <(PRODUCT_DIR)/sim && cp -f <(PRODUCT_DIR)/gpugate_sim.so <(PRODUCT_DIR)/sim/libnvidia-ml.so.1"]
        }
      ]
    }
  ]
}
