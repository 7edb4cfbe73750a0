#!/usr/bin/env python3
"""Reads every GPU's identity and memory through Python's pynvml, for gpu-validate.sh's identity check.

Prints one JSON object on stdout: {"driverVersion", "devices": [{"index", "uuid", "pciBusId", "name",
"totalBytes", "usedBytes", "reservedBytes", "memorySource"}]}. Exits 3 with the reason on stderr when
pynvml cannot be imported (the check is then skipped), 1 when NVML fails. Read-only: getters only.
"""
import json
import sys

try:
    import pynvml
except Exception as err:  # ImportError, or a broken install
    sys.stderr.write(f"pynvml is not importable: {err}\n")
    sys.exit(3)


def text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def memory(handle):
    v2 = getattr(pynvml, "nvmlMemory_v2", None)
    if v2 is not None:
        try:
            info = pynvml.nvmlDeviceGetMemoryInfo(handle, version=v2)
            return {"totalBytes": info.total, "usedBytes": info.used, "reservedBytes": info.reserved,
                    "memorySource": "v2"}
        except (TypeError, pynvml.NVMLError):
            pass
    info = pynvml.nvmlDeviceGetMemoryInfo(handle)
    return {"totalBytes": info.total, "usedBytes": info.used, "reservedBytes": None, "memorySource": "v1"}


def main():
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        sys.stderr.write(f"pynvml: nvmlInit failed: {err}\n")
        sys.exit(1)
    try:
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            pci = pynvml.nvmlDeviceGetPciInfo(handle)
            device = {
                "index": index,
                "uuid": text(pynvml.nvmlDeviceGetUUID(handle)),
                "pciBusId": text(pci.busId),
                "name": text(pynvml.nvmlDeviceGetName(handle)),
            }
            device.update(memory(handle))
            devices.append(device)
        result = {"driverVersion": text(pynvml.nvmlSystemGetDriverVersion()), "devices": devices}
    except pynvml.NVMLError as err:
        sys.stderr.write(f"pynvml: {err}\n")
        sys.exit(1)
    finally:
        pynvml.nvmlShutdown()
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
