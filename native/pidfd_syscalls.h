// The pidfd system call numbers, for kernel headers older than 5.3 that lack them (the numbers
// are the same on every architecture). Shared by pidfd.cc (--kill-stale) and helper_client.cc
// (the NVML helper, held by a pidfd from its spawn to its reaping).
#pragma once

#include <sys/syscall.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
