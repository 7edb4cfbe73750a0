// Plain values in and out of a byte string: the frames between the addon and its NVML helper
// process (helper_protocol.h). Both ends are the same build on the same machine, so numbers
// travel in host order. A reader that runs past its input throws: a short or garbled frame is
// a failure of the channel, never data.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpugate {

class ByteWriter {
 public:
  void U8(uint8_t value) { bytes_.push_back(static_cast<char>(value)); }
  void I32(int32_t value) { Raw(&value, sizeof value); }
  void U32(uint32_t value) { Raw(&value, sizeof value); }
  void F64(double value) { Raw(&value, sizeof value); }
  void String(const std::string& text) {
    U32(static_cast<uint32_t>(text.size()));
    bytes_.append(text);
  }
  void Doubles(const double* values, size_t count) {
    U32(static_cast<uint32_t>(count));
    Raw(values, count * sizeof(double));
  }
  std::string& Bytes() { return bytes_; }

 private:
  void Raw(const void* data, size_t size) { bytes_.append(static_cast<const char*>(data), size); }
  std::string bytes_;
};

class ByteReader {
 public:
  ByteReader(const char* data, size_t size) : data_(data), size_(size) {}
  uint8_t U8() { return static_cast<uint8_t>(*Take(1)); }
  int32_t I32() { return Fixed<int32_t>(); }
  uint32_t U32() { return Fixed<uint32_t>(); }
  double F64() { return Fixed<double>(); }
  std::string String() {
    const uint32_t size = U32();
    const char* start = Take(size);
    return std::string(start, size);
  }
  // A count of doubles, then that many into `out` (resized).
  void Doubles(std::vector<double>* out) {
    const uint32_t count = U32();
    if (count > (size_ - used_) / sizeof(double)) Overrun();
    out->resize(count);
    if (count > 0) std::memcpy(out->data(), Take(count * sizeof(double)), count * sizeof(double));
  }
  bool AtEnd() const { return used_ == size_; }

 private:
  template <typename T>
  T Fixed() {
    T value;
    std::memcpy(&value, Take(sizeof value), sizeof value);
    return value;
  }
  const char* Take(size_t size) {
    if (size > size_ - used_) Overrun();
    const char* start = data_ + used_;
    used_ += size;
    return start;
  }
  [[noreturn]] static void Overrun() { throw std::runtime_error("a frame from the NVML helper ended early (garbled channel)"); }
  const char* data_;
  size_t size_;
  size_t used_ = 0;
};

}  // namespace gpugate
