// A Go NVML client linked the way go-nvml links (test/clients/go-client.test.ts builds and runs it): cgo
// calls NVML functions by name, left unresolved at link time, and the dynamic loader resolves
// them from libnvidia-ml.so.1 opened RTLD_LAZY|RTLD_GLOBAL. A function the library lacks ends the
// program with the loader's "symbol lookup error" (exit 127) when it is first called, or, run with
// LD_BIND_NOW=1 and the library preloaded, at start for any function the program references.
//
// functions.c, written by the test from the driver profile table, references every function of
// one driver header and says whether that header has nvmlDeviceGetAddressingMode. The program
// then does what go-nvml's devices example does: init, count, and per device its UUID and its
// addressing mode.
package main

/*
#cgo LDFLAGS: -ldl -Wl,--export-dynamic -Wl,--unresolved-symbols=ignore-in-object-files
#include <dlfcn.h>
#include <stdlib.h>

typedef void* device_t;
int nvmlInit_v2(void);
int nvmlShutdown(void);
const char* nvmlErrorString(int result);
int nvmlDeviceGetCount_v2(unsigned int* count);
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, device_t* device);
int nvmlDeviceGetUUID(device_t device, char* uuid, unsigned int length);

// In functions.c: every function of the header, and the addressing-mode query where it has one.
void gpugate_reference_header_functions(void);
int gpugate_header_has_addressing_mode(void);
int gpugate_addressing_mode(device_t device, unsigned int* mode);
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"
)

const addressingModeV1 = 0x01000008

func check(what string, rc C.int) {
	if rc != 0 {
		fmt.Printf("%s failed: %s (%d)\n", what, C.GoString(C.nvmlErrorString(rc)), int(rc))
		os.Exit(1)
	}
}

func main() {
	name := C.CString("libnvidia-ml.so.1")
	defer C.free(unsafe.Pointer(name))
	if C.dlopen(name, C.RTLD_LAZY|C.RTLD_GLOBAL) == nil {
		fmt.Printf("dlopen failed: %s\n", C.GoString(C.dlerror()))
		os.Exit(2)
	}
	if len(os.Args) > 1 && os.Args[1] == "--call-every-function" {
		// Never used by the test: it keeps the references the linker must not drop.
		C.gpugate_reference_header_functions()
	}
	check("init", C.nvmlInit_v2())
	var count C.uint
	check("count", C.nvmlDeviceGetCount_v2(&count))
	for i := C.uint(0); i < count; i++ {
		var device C.device_t
		check(fmt.Sprintf("handle %d", i), C.nvmlDeviceGetHandleByIndex_v2(i, &device))
		var uuid [96]C.char
		check(fmt.Sprintf("uuid %d", i), C.nvmlDeviceGetUUID(device, &uuid[0], 96))
		fmt.Printf("uuid=%s\n", C.GoString(&uuid[0]))
		if C.gpugate_header_has_addressing_mode() != 0 {
			mode := [2]C.uint{addressingModeV1, 0}
			check(fmt.Sprintf("addressing mode %d", i), C.gpugate_addressing_mode(device, &mode[0]))
			fmt.Printf("mode=%d\n", int(mode[1]))
		}
	}
	check("shutdown", C.nvmlShutdown())
}
