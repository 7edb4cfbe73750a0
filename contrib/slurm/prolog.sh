#!/bin/sh
# Slurm Prolog snippet: refuse to start a job on GPUs that an earlier job still holds.
#
# Install: call it from the script named by Prolog= in slurm.conf (it runs as root on each
# allocated node before the job). A non-zero exit drains the node and requeues the job held:
# the right outcome for leaked GPU memory, which needs an operator (or a reboot) anyway.
#
# SLURM_JOB_GPUS holds the NVML indices of the job's GPUs; jobs without GPUs are not checked.
[ -n "${SLURM_JOB_GPUS:-}" ] || exit 0

# One sample, no waiting (the prolog must be quick): exit 0 when each GPU has at most 1 GiB in
# use and no process on it, 75 when busy, 69 when NVML is broken. The log line says which GPU,
# how much memory and which holder; Slurm copies it into slurmd's log.
exec /usr/local/bin/gpugate check --gpus "$SLURM_JOB_GPUS" --max-used 1GiB --no-processes --nvml-timeout 10s
