// A real CUDA context holding a known amount of GPU memory, for gpu-validate.sh (built with nvcc
// only when nvcc is present; the script prefers Python with torch or cupy).
//
// usage: holder MIB [MAX_SECONDS]
// Allocates MIB MiB on CUDA device 0 (the script selects the GPU with CUDA_VISIBLE_DEVICES),
// writes to it so the pages are really backed, prints "READY <pid> <bytes>" and sleeps until
// killed (at most MAX_SECONDS, default 240). Exits 3 with the CUDA error when it cannot.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: holder MIB [MAX_SECONDS]\n");
    return 64;
  }
  const unsigned long long mib = std::strtoull(argv[1], nullptr, 10);
  const unsigned maxSeconds = argc > 2 ? static_cast<unsigned>(std::strtoul(argv[2], nullptr, 10)) : 240U;
  const size_t bytes = static_cast<size_t>(mib) * 1024U * 1024U;
  void* buffer = nullptr;
  cudaError_t err = cudaMalloc(&buffer, bytes);
  if (err == cudaSuccess) err = cudaMemset(buffer, 1, bytes);
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::fprintf(stderr, "CUDA could not hold %llu MiB: %s\n", mib, cudaGetErrorString(err));
    return 3;
  }
  std::printf("READY %ld %zu nvcc\n", static_cast<long>(getpid()), bytes);
  std::fflush(stdout);
  sleep(maxSeconds);
  cudaFree(buffer);
  return 0;
}
