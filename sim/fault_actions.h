// What the `kernelBlock` and `crash` faults do to the calling thread (docs/scenarios.md, Faults):
// a write that a frozen filesystem holds in uninterruptible sleep, and a real death by signal.
#pragma once

#include <string>

namespace gpugate_sim {

/**
 * Opens `path` (appending, created 0600, never through a symbolic link) and writes one byte to
 * it. On a filesystem frozen with `fsfreeze -f` the write sleeps uninterruptibly (state D) until
 * it is thawed. False with `error` set (one line, naming the path) when the open or the write fails.
 */
bool writeThroughKernel(const std::string& path, std::string& error);

/** The number of a signal `crash` accepts by name ("SIGSEGV"), or 0 when it is not one. */
int crashSignalNumber(const std::string& name);

/** The names `crash` accepts, comma-separated, for error messages. */
std::string crashSignalNames();

/** Kills the calling process with `signal`: default disposition restored, unblocked, raised. */
[[noreturn]] void crashWith(int signal);

}  // namespace gpugate_sim
