#!/bin/sh
# Node health check for NHC (or any HealthCheckProgram): flags a node whose idle GPUs hold
# memory or processes. It must finish well under NHC's 60 s kill limit: one sample, a 10 s
# NVML deadline. Run it only on idle nodes (NHC_CHECK_ALL or a "node is idle" guard), or it
# reports the running jobs' own memory.
/usr/local/bin/gpugate check --max-used 1GiB --no-processes --nvml-timeout 10s -q || {
  status=$?
  echo "gpugate check failed with status $status (75 = GPU memory still in use, 69 = NVML unavailable)"
  exit 1
}
