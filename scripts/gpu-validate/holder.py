#!/usr/bin/env python3
"""A real CUDA context holding a known amount of GPU memory, for gpu-validate.sh.

usage: holder.py MIB [MAX_SECONDS]

Uses torch when it is importable and sees a GPU, else cupy. Allocates MIB MiB on CUDA device 0
(gpu-validate.sh selects the GPU with CUDA_VISIBLE_DEVICES), writes to it so the pages are really
backed, prints `READY <pid> <bytes>` and sleeps until killed (at most MAX_SECONDS, default 240).
Exits 3 with the reason on stderr when neither library can hold memory.
"""
import os
import sys
import time


def hold_with_torch(size):
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("torch is importable but sees no CUDA device")
    buffer = torch.empty(size, dtype=torch.uint8, device="cuda:0")
    buffer.fill_(1)
    torch.cuda.synchronize()
    return "torch", buffer


def hold_with_cupy(size):
    import cupy
    buffer = cupy.ones(size, dtype=cupy.uint8)
    cupy.cuda.Device(0).synchronize()
    return "cupy", buffer


def main():
    if len(sys.argv) < 2 or not sys.argv[1].isdigit():
        sys.stderr.write("usage: holder.py MIB [MAX_SECONDS]\n")
        sys.exit(64)
    size = int(sys.argv[1]) * 1024 * 1024
    max_seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 240
    reasons = []
    for attempt in (hold_with_torch, hold_with_cupy):
        try:
            library, buffer = attempt(size)
            break
        except Exception as err:  # ImportError, no device, out of memory
            reasons.append(f"{attempt.__name__[10:]}: {err}")
    else:
        sys.stderr.write("no CUDA-capable Python library: " + "; ".join(reasons) + "\n")
        sys.exit(3)
    sys.stdout.write(f"READY {os.getpid()} {size} {library}\n")
    sys.stdout.flush()
    time.sleep(max_seconds)
    del buffer


if __name__ == "__main__":
    main()
