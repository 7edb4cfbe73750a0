#!/bin/sh
# Slurm Epilog snippet: after a job ends, wait until its GPUs are released before Slurm hands
# them to the next job.
#
# Install: call it from the script named by Epilog= in slurm.conf. Memory of a finished job is
# released asynchronously (seconds, or longer with large pinned host buffers); waiting here
# keeps the next job's prolog check from failing on memory that is merely draining.
# --timeout stays well below EpilogMsgTime / UnkillableStepTimeout defaults; if the GPUs are
# still busy after 50 s the epilog fails and Slurm drains the node for an operator to look at.
[ -n "${SLURM_JOB_GPUS:-}" ] || exit 0

# Leaked NCCL / PSM shared-memory files that no live process has open or mapped are removed
# too: they fill /dev/shm until a later job fails with "unhandled system error" or SIGBUS.
# (Slurm's own cgroup clean-up kills the job's processes; gpugate never kills here.)
exec /usr/local/bin/gpugate wait --gpus "$SLURM_JOB_GPUS" --max-used 1GiB --stable 2s --timeout 50s \
  --clean-shm 'nccl-*' --clean-shm 'psm_*'
