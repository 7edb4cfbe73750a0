#!/usr/bin/env python3
"""Reads what the NVML library itself does where gpugate's simulator imitates a driver quirk.

For gpu-validate.sh's driver-abi step. Loads the library GPUGATE_NVML_LIBRARY names, as gpugate does,
else libnvidia-ml.so.1 (the normal search path), with ctypes,
so no NVML binding is needed, and prints one JSON object on stdout:
  {"libraryPath", "driverVersion", "nvmlVersion", "cudaDriverVersion",
   "symbols": {NAME: true|false, ...}   for every NAME read from the file given as argv[1] (one a line),
   "devices": [{"index", "migMode": [rc, current, pending], "utilization": [rc, gpu, memory],
                "driverModelV2": [rc, current, pending], "addressingMode": [rc, value]}]}
An rc is the nvmlReturn_t of the call, or null where the library lacks the function. Exits 1 with
the reason on stderr when the library cannot be loaded or initialised. Read-only: getters only.
"""
import ctypes
import json
import os
import sys

ADDRESSING_MODE_V1 = 0x01000008  # nvmlDeviceAddressingMode_v1: sizeof 8, version 1


def call(lib, name, *args):
    """The return code of lib.name(*args), or None when the library does not export name."""
    if not hasattr(lib, name):
        return None
    function = getattr(lib, name)
    function.restype = ctypes.c_int
    return function(*args)


def device_facts(lib, index):
    handle = ctypes.c_void_p()
    rc = call(lib, "nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(index), ctypes.byref(handle))
    if rc != 0:
        return {"index": index, "handle": rc}
    current, pending = ctypes.c_uint(99), ctypes.c_uint(99)
    mig = call(lib, "nvmlDeviceGetMigMode", handle, ctypes.byref(current), ctypes.byref(pending))
    utilization = (ctypes.c_uint * 2)(0, 0)
    util_rc = call(lib, "nvmlDeviceGetUtilizationRates", handle, utilization)
    model, model_pending = ctypes.c_int(99), ctypes.c_int(99)
    model_rc = call(lib, "nvmlDeviceGetDriverModel_v2", handle, ctypes.byref(model), ctypes.byref(model_pending))
    mode = (ctypes.c_uint * 2)(ADDRESSING_MODE_V1, 99)
    mode_rc = call(lib, "nvmlDeviceGetAddressingMode", handle, mode)
    return {
        "index": index,
        "migMode": [mig, current.value, pending.value],
        "utilization": [util_rc, utilization[0], utilization[1]],
        "driverModelV2": [model_rc, model.value, model_pending.value],
        "addressingMode": [mode_rc, mode[1]],
    }


def text_of(lib, name):
    buffer = ctypes.create_string_buffer(96)
    rc = call(lib, name, buffer, ctypes.c_uint(96))
    return buffer.value.decode("utf-8", "replace") if rc == 0 else None


def loaded_path():
    """The file the dynamic loader mapped as libnvidia-ml (from /proc/self/maps), or None."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                path = line.split(maxsplit=5)[5].strip() if len(line.split(maxsplit=5)) == 6 else ""
                if "libnvidia-ml" in path or "gpugate_sim" in path:
                    return path
    except OSError:
        return None
    return None


def main():
    with open(sys.argv[1], encoding="utf-8") as names:
        wanted = [line.strip() for line in names if line.strip()]
    # The library gpugate itself is pointed at, when it is (GPUGATE_NVML_LIBRARY), else the driver's.
    name = os.environ.get("GPUGATE_NVML_LIBRARY") or "libnvidia-ml.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError as err:
        sys.stderr.write(f"cannot load {name}: {err}\n")
        sys.exit(1)
    rc = call(lib, "nvmlInit_v2")
    if rc is None:
        rc = call(lib, "nvmlInit")
    if rc != 0:
        sys.stderr.write(f"nvmlInit failed: {rc}\n")
        sys.exit(1)
    cuda = ctypes.c_int(0)
    cuda_rc = call(lib, "nvmlSystemGetCudaDriverVersion", ctypes.byref(cuda))
    count = ctypes.c_uint(0)
    call(lib, "nvmlDeviceGetCount_v2", ctypes.byref(count))
    facts = {
        "libraryPath": loaded_path(),
        "driverVersion": text_of(lib, "nvmlSystemGetDriverVersion"),
        "nvmlVersion": text_of(lib, "nvmlSystemGetNVMLVersion"),
        "cudaDriverVersion": cuda.value if cuda_rc == 0 else None,
        "symbols": {name: hasattr(lib, name) for name in wanted},
        "devices": [device_facts(lib, i) for i in range(count.value)],
    }
    call(lib, "nvmlShutdown")
    json.dump(facts, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
