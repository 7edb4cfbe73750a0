#!/usr/bin/env python3
"""What the real driver does where gpugate's facts are still unverified, for gpu-validate.sh.

usage: driver-facts.py GPU_INDEX

Reads libnvidia-ml.so.1 directly through ctypes (no pynvml needed) and prints one JSON document:
per GPU, the v1 and v2 memory readings and which semantics the v2 `used` has (reserved included
or not), whether the process lists are readable (and whether per-process memory is "not
available"), the recovery action field; and for GPU_INDEX, when libcuda.so.1 is present, what
one CUDA context costs and CUDA's total next to NVML's. Read-only: the context is created and
destroyed, nothing is allocated beyond it. Exits 3 when NVML cannot be loaded or initialised.
"""
import ctypes
import json
import os
import sys

MIB = 1024 * 1024
NOT_AVAILABLE = 2**64 - 1
# Field id and actions from NVIDIA's nvml.h (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, nvmlDeviceGpuRecoveryAction_t).
RECOVERY_ACTION_FIELD = 230
RECOVERY_ACTIONS = {0: "none", 1: "gpu-reset", 2: "node-reboot", 3: "drain-p2p", 4: "drain-and-reset"}
CODES = {0: "SUCCESS", 2: "NVML_ERROR_INVALID_ARGUMENT", 3: "NVML_ERROR_NOT_SUPPORTED", 4: "NVML_ERROR_NO_PERMISSION",
         7: "NVML_ERROR_INSUFFICIENT_SIZE", 13: "NVML_ERROR_FUNCTION_NOT_FOUND", 15: "NVML_ERROR_GPU_IS_LOST",
         25: "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", 999: "NVML_ERROR_UNKNOWN"}
# The slack gpugate allows between a memory reading's sum and its total (src/gate/criteria.ts).
def tolerance(total):
    return max(64 * MIB, -(-total // 100))


class MemoryV1(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class MemoryV2(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong), ("reserved", ctypes.c_ulonglong),
                ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class ProcessInfo(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class FieldValue(ctypes.Structure):
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint), ("timestamp", ctypes.c_longlong),
                ("latencyUsec", ctypes.c_longlong), ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int),
                ("value", ctypes.c_ulonglong)]


def code(rc):
    return CODES.get(rc, f"NVML_ERROR_{rc}")


def symbol(lib, name):
    try:
        return getattr(lib, name)
    except AttributeError:
        return None


def v2_semantics(total, reserved, free, used):
    """Which way of counting reserved makes the reading add up (the closer sum, as gpugate decides)."""
    excluded = abs(free + used + reserved - total)
    included = abs(free + used - total)
    if min(excluded, included) > tolerance(total):
        return "neither"
    if excluded == included:
        return "cannot-tell"
    return "used-includes-reserved" if included < excluded else "used-excludes-reserved"


def memory(lib, handle):
    out = {}
    v1 = MemoryV1()
    rc = lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(v1))
    out["v1"] = {"totalBytes": v1.total, "freeBytes": v1.free, "usedBytes": v1.used} if rc == 0 else {"error": code(rc)}
    get_v2 = symbol(lib, "nvmlDeviceGetMemoryInfo_v2")
    if get_v2 is None:
        out["v2"] = {"error": "NVML_ERROR_FUNCTION_NOT_FOUND"}
        return out
    v2 = MemoryV2()
    v2.version = ctypes.sizeof(MemoryV2) | (2 << 24)
    rc = get_v2(handle, ctypes.byref(v2))
    if rc != 0:
        out["v2"] = {"error": code(rc)}
        return out
    out["v2"] = {"totalBytes": v2.total, "reservedBytes": v2.reserved, "freeBytes": v2.free, "usedBytes": v2.used,
                 "semantics": v2_semantics(v2.total, v2.reserved, v2.free, v2.used)}
    return out


def process_list(lib, handle):
    """The compute list: readable or not (the NVML code), and whether any entry's memory is "not available"."""
    for name in ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"):
        fn = symbol(lib, name)
        if fn is None:
            continue
        count = ctypes.c_uint(0)
        rc = fn(handle, ctypes.byref(count), None)
        if rc not in (0, 7):
            return {"symbol": name, "readable": False, "code": code(rc)}
        entries = (ProcessInfo * (count.value + 16))()
        count = ctypes.c_uint(len(entries))
        rc = fn(handle, ctypes.byref(count), entries)
        if rc != 0:
            return {"symbol": name, "readable": False, "code": code(rc)}
        # Entry 0 sits at the same place whatever the driver's stride: enough to see "not available".
        first = entries[0].usedGpuMemory if count.value > 0 else None
        return {"symbol": name, "readable": True, "code": "SUCCESS", "count": count.value,
                "firstMemoryNotAvailable": first == NOT_AVAILABLE if first is not None else None}
    return {"symbol": None, "readable": False, "code": "NVML_ERROR_FUNCTION_NOT_FOUND"}


def recovery_action(lib, handle):
    fn = symbol(lib, "nvmlDeviceGetFieldValues")
    if fn is None:
        return {"error": "NVML_ERROR_FUNCTION_NOT_FOUND"}
    value = FieldValue()
    value.fieldId = RECOVERY_ACTION_FIELD
    rc = fn(handle, 1, ctypes.byref(value))
    if rc != 0:
        return {"error": code(rc)}
    if value.nvmlReturn != 0:
        return {"error": code(value.nvmlReturn)}
    number = value.value & 0xFFFFFFFF
    return {"value": number, "action": RECOVERY_ACTIONS.get(number, f"unknown-{number}")}


def nested_pid_namespace():
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("NSpid:"):
                    return len(line.split()) > 2
    except OSError:
        pass
    return None


def cuda_context(lib, handle, nvml_total, reserved):
    """One CUDA context on the GPU (CUDA_VISIBLE_DEVICES names it): its cost in NVML's free memory, CUDA's totals."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as err:
        return {"available": False, "reason": f"libcuda.so.1 not loadable: {err}"}
    size = ctypes.c_size_t
    if cuda.cuInit(0) != 0:
        return {"available": False, "reason": "cuInit failed"}
    device = ctypes.c_int()
    if cuda.cuDeviceGet(ctypes.byref(device), 0) != 0:
        return {"available": False, "reason": "cuDeviceGet(0) failed: is CUDA_VISIBLE_DEVICES this GPU's UUID?"}
    cuda_total = size()
    cuda.cuDeviceTotalMem_v2(ctypes.byref(cuda_total), device)
    before = MemoryV1()
    lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(before))
    context = ctypes.c_void_p()
    rc = cuda.cuCtxCreate_v2(ctypes.byref(context), 0, device)
    if rc != 0:
        return {"available": False, "reason": f"cuCtxCreate_v2 failed with CUDA error {rc}"}
    try:
        free, total = size(), size()
        cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
        after = MemoryV1()
        lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(after))
    finally:
        cuda.cuCtxDestroy_v2(context)
    return {
        "available": True,
        "cudaTotalBytes": total.value,
        "cudaDeviceTotalBytes": cuda_total.value,
        "cudaFreeWithContextBytes": free.value,
        "nvmlTotalBytes": nvml_total,
        "nvmlTotalMinusReservedBytes": None if reserved is None else nvml_total - reserved,
        "nvmlFreeBeforeContextBytes": before.free,
        "nvmlFreeWithContextBytes": after.free,
        "contextBytes": before.free - after.free,
    }


def main():
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        sys.stderr.write("usage: driver-facts.py GPU_INDEX\n")
        sys.exit(64)
    chosen = int(sys.argv[1])
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as err:
        sys.stderr.write(f"libnvidia-ml.so.1 not loadable: {err}\n")
        sys.exit(3)
    init = symbol(lib, "nvmlInit_v2") or lib.nvmlInit
    rc = init()
    if rc != 0:
        sys.stderr.write(f"nvmlInit failed: {code(rc)}\n")
        sys.exit(3)
    try:
        version = ctypes.create_string_buffer(80)
        lib.nvmlSystemGetDriverVersion(version, 80)
        count = ctypes.c_uint()
        (symbol(lib, "nvmlDeviceGetCount_v2") or lib.nvmlDeviceGetCount)(ctypes.byref(count))
        by_index = symbol(lib, "nvmlDeviceGetHandleByIndex_v2") or lib.nvmlDeviceGetHandleByIndex
        gpus, cuda = [], {"available": False, "reason": f"GPU {chosen} not found"}
        for index in range(count.value):
            handle = ctypes.c_void_p()
            rc = by_index(index, ctypes.byref(handle))
            if rc != 0:
                gpus.append({"index": index, "error": code(rc)})
                continue
            gpu = {"index": index, "memory": memory(lib, handle), "processList": process_list(lib, handle),
                   "recoveryAction": recovery_action(lib, handle)}
            gpus.append(gpu)
            if index == chosen:
                v2 = gpu["memory"]["v2"]
                v1 = gpu["memory"]["v1"]
                total = v2.get("totalBytes", v1.get("totalBytes"))
                cuda = cuda_context(lib, handle, total, v2.get("reservedBytes")) if total is not None else {"available": False, "reason": "no memory reading"}
        print(json.dumps({"driverVersion": version.value.decode(errors="replace"), "nestedPidNamespace": nested_pid_namespace(),
                          "gpu": chosen, "gpus": gpus, "cuda": cuda}, indent=2))
    finally:
        lib.nvmlShutdown()


if __name__ == "__main__":
    main()
