{
  "variables": {
    "gpugate_napi_version": "8"
  },
  "target_defaults": {
    "cflags_cc": ["-std=c++17", "-fvisibility=hidden", "-Wall", "-Wextra"],
    "cflags_cc!": ["-fno-exceptions", "-std=gnu++17", "-std=gnu++20"],
    "defines": ["NAPI_VERSION=<(gpugate_napi_version)"]
  },
  "targets": [
    {
      "target_name": "gpugate_nvml_core",
      "type": "static_library",
      "sources": ["native/nvml_core.unity.cc"],
      "cflags": ["-fPIC"]
    },
    {
      "target_name": "gpugate_sim_core",
      "type": "static_library",
      "sources": ["sim/sim_core.unity.cc"],
      "cflags": ["-fPIC"]
    },
    {
      "target_name": "gpugate",
      "dependencies": ["gpugate_nvml_core"],
      "sources": [
        "native/addon.cc",
        "native/child_reap.cc",
        "native/direct_call.cc",
        "native/helper_client.cc",
        "native/introspection.cc",
        "native/lease_lock.cc",
        "native/notify.cc",
        "native/nvml_backend.cc",
        "native/pidfd.cc",
        "native/records_js.cc",
        "native/session_api.cc",
        "native/signal_source.cc",
        "native/worker.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_CPP_EXCEPTIONS", "NODE_ADDON_API_CPP_EXCEPTIONS_ALL", "NODE_ADDON_API_DISABLE_DEPRECATED"],
      "libraries": ["-ldl", "-lpthread"]
    },
    {
      "target_name": "gpugate-nvml-helper",
      "type": "executable",
      "dependencies": ["gpugate_nvml_core"],
      "sources": ["native/helper/main.cc", "native/helper/process_title.cc"],
      "ldflags": ["-static-libstdc++", "-static-libgcc"],
      "libraries": ["-ldl", "-lpthread"]
    },
    {
      "target_name": "gpugate_sim",
      "type": "shared_library",
      "dependencies": ["gpugate_sim_core"],
      "sources": ["sim/symbols.cc"],
      "defines": ["GPUGATE_SIM_LIBRARY_PROFILE=current"],
      "ldflags": [
        "-Xlinker",
        "--version-script",
        "-Xlinker",
        "<!(node sim/profile-table.cjs version-script current build/sim-exports)",
        "-static-libstdc++",
        "-static-libgcc"
      ],
      "libraries": ["-lpthread"]
    },
    {
      "target_name": "gpugate_sim_legacy",
      "type": "shared_library",
      "dependencies": ["gpugate_sim_core"],
      "sources": ["sim/symbols.cc"],
      "defines": ["GPUGATE_SIM_LIBRARY_PROFILE=legacy"],
      "ldflags": [
        "-Xlinker",
        "--version-script",
        "-Xlinker",
        "<!(node sim/profile-table.cjs version-script legacy build/sim-exports)",
        "-static-libstdc++",
        "-static-libgcc"
      ],
      "libraries": ["-lpthread"]
    },
    {
      "target_name": "gpugate_sim_r470",
      "type": "shared_library",
      "dependencies": ["gpugate_sim_core"],
      "sources": ["sim/symbols.cc"],
      "defines": ["GPUGATE_SIM_LIBRARY_PROFILE=r470"],
      "ldflags": [
        "-Xlinker",
        "--version-script",
        "-Xlinker",
        "<!(node sim/profile-table.cjs version-script r470 build/sim-exports)",
        "-static-libstdc++",
        "-static-libgcc"
      ],
      "libraries": ["-lpthread"]
    },
    {
      "target_name": "gpugate_sim_r510",
      "type": "shared_library",
      "dependencies": ["gpugate_sim_core"],
      "sources": ["sim/symbols.cc"],
      "defines": ["GPUGATE_SIM_LIBRARY_PROFILE=r510"],
      "ldflags": [
        "-Xlinker",
        "--version-script",
        "-Xlinker",
        "<!(node sim/profile-table.cjs version-script r510 build/sim-exports)",
        "-static-libstdc++",
        "-static-libgcc"
      ],
      "libraries": ["-lpthread"]
    },
    {
      "target_name": "gpugate_sim_r535_early",
      "type": "shared_library",
      "dependencies": ["gpugate_sim_core"],
      "sources": ["sim/symbols.cc"],
      "defines": ["GPUGATE_SIM_LIBRARY_PROFILE=r535_early"],
      "ldflags": [
        "-Xlinker",
        "--version-script",
        "-Xlinker",
        "<!(node sim/profile-table.cjs version-script r535_early build/sim-exports)",
        "-static-libstdc++",
        "-static-libgcc"
      ],
      "libraries": ["-lpthread"]
    },
    {
      "target_name": "gpugate_sim_r535",
      "type": "shared_library",
      "dependencies": ["gpugate_sim_core"],
      "sources": ["sim/symbols.cc"],
      "defines": ["GPUGATE_SIM_LIBRARY_PROFILE=r535"],
      "ldflags": [
        "-Xlinker",
        "--version-script",
        "-Xlinker",
        "<!(node sim/profile-table.cjs version-script r535 build/sim-exports)",
        "-static-libstdc++",
        "-static-libgcc"
      ],
      "libraries": ["-lpthread"]
    },
    {
      "target_name": "gpugate_sim_nvml_name",
      "type": "none",
      "dependencies": ["gpugate_sim", "gpugate_sim_legacy", "gpugate_sim_r470", "gpugate_sim_r510", "gpugate_sim_r535_early", "gpugate_sim_r535"],
      "actions": [
        {
          "action_name": "install_current_as_libnvidia_ml",
          "inputs": ["<(PRODUCT_DIR)/gpugate_sim.so"],
          "outputs": [
            "<(PRODUCT_DIR)/sim/libnvidia-ml.so.1",
            "<(PRODUCT_DIR)/sim/current/libnvidia-ml.so.1"
          ],
          "action": ["node", "sim/profile-table.cjs", "install", "current", "<(PRODUCT_DIR)/gpugate_sim.so", "<(PRODUCT_DIR)"]
        },
        {
          "action_name": "install_legacy_as_libnvidia_ml",
          "inputs": ["<(PRODUCT_DIR)/gpugate_sim_legacy.so"],
          "outputs": [
            "<(PRODUCT_DIR)/sim/legacy/libnvidia-ml.so.1"
          ],
          "action": ["node", "sim/profile-table.cjs", "install", "legacy", "<(PRODUCT_DIR)/gpugate_sim_legacy.so", "<(PRODUCT_DIR)"]
        },
        {
          "action_name": "install_r470_as_libnvidia_ml",
          "inputs": ["<(PRODUCT_DIR)/gpugate_sim_r470.so"],
          "outputs": [
            "<(PRODUCT_DIR)/sim/r470/libnvidia-ml.so.1"
          ],
          "action": ["node", "sim/profile-table.cjs", "install", "r470", "<(PRODUCT_DIR)/gpugate_sim_r470.so", "<(PRODUCT_DIR)"]
        },
        {
          "action_name": "install_r510_as_libnvidia_ml",
          "inputs": ["<(PRODUCT_DIR)/gpugate_sim_r510.so"],
          "outputs": [
            "<(PRODUCT_DIR)/sim/r510/libnvidia-ml.so.1"
          ],
          "action": ["node", "sim/profile-table.cjs", "install", "r510", "<(PRODUCT_DIR)/gpugate_sim_r510.so", "<(PRODUCT_DIR)"]
        },
        {
          "action_name": "install_r535_early_as_libnvidia_ml",
          "inputs": ["<(PRODUCT_DIR)/gpugate_sim_r535_early.so"],
          "outputs": [
            "<(PRODUCT_DIR)/sim/r535-early/libnvidia-ml.so.1"
          ],
          "action": ["node", "sim/profile-table.cjs", "install", "r535_early", "<(PRODUCT_DIR)/gpugate_sim_r535_early.so", "<(PRODUCT_DIR)"]
        },
        {
          "action_name": "install_r535_as_libnvidia_ml",
          "inputs": ["<(PRODUCT_DIR)/gpugate_sim_r535.so"],
          "outputs": [
            "<(PRODUCT_DIR)/sim/r535/libnvidia-ml.so.1"
          ],
          "action": ["node", "sim/profile-table.cjs", "install", "r535", "<(PRODUCT_DIR)/gpugate_sim_r535.so", "<(PRODUCT_DIR)"]
        }
      ]
    }
  ]
}
