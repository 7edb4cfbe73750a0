// The helper's command line as its state: what /proc/PID/cmdline and ps show, rewritten before
// every NVML call to `gpugate-nvml-helper in <function> gpu <index|-> since <unixMs>` and to
// `gpugate-nvml-helper idle` between requests. A helper stuck in the kernel thus says on which
// call and since when to anyone who can read /proc (gpugate's stale-helper check, doctor, ps).
//
// The text is written over the argv area the kernel reports (reserved at spawn by a padded
// argument), NUL-terminated, with the area's last byte set non-zero: the kernel then reports the
// area up to the first NUL as one string (its setproctitle convention), so the command line is
// exactly the state text, single spaces, one trailing NUL. No allocation per call.
#pragma once

namespace gpugate {

// Takes over argv's area; false when it is too small or not contiguous.
bool TakeProcessTitle(int argc, char** argv);
// Writes `text` (truncated to the area) as the command line.
void SetProcessTitle(const char* text);
// `gpugate-nvml-helper in <symbol> gpu <device|-> since <CLOCK_REALTIME ms now>`.
void ShowCallInTitle(const char* symbol, int device);
void ShowIdleInTitle();

}  // namespace gpugate
