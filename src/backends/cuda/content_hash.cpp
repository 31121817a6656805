#include "backends/cuda/content_hash.hpp"

#include <cstdio>

namespace ragdot::cuda {

namespace {
std::uint64_t avalanche(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
}  // namespace

ContentHash& ContentHash::add(std::string_view bytes) {
  for (unsigned char c : bytes) {
    a_ = (a_ ^ c) * 0x100000001b3ull;
    b_ = (b_ ^ (c + 0x9eu)) * 0x1000193000001b3ull;
  }
  return *this;
}

ContentHash& ContentHash::add_field(std::string_view bytes) {
  const std::string len = std::to_string(bytes.size()) + ":";
  return add(len).add(bytes);
}

std::string ContentHash::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(avalanche(a_)),
                static_cast<unsigned long long>(avalanche(b_ ^ a_)));
  return buf;
}

std::uint64_t fnv1a64(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace ragdot::cuda
