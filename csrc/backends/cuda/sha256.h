// A small self-contained SHA-256 (FIPS 180-4) for the kernel cache: keys and payload checks.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tp::cuda {

// Incremental: update() any number of times, then digest() once.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t bytes);
  void update(const std::string& data) { update(data.data(), data.size()); }
  std::array<uint8_t, 32> digest();

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string to_hex(const std::array<uint8_t, 32>& digest);
std::string sha256_hex(const std::string& data);

}  // namespace tp::cuda
