// A 128-bit content hash for cache keys: two independently seeded 64-bit FNV-1a streams with a
// final avalanche. Not cryptographic; collisions are also caught by the key stored in each entry.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ragdot::cuda {

class ContentHash {
 public:
  ContentHash& add(std::string_view bytes);
  // Adds the length first, so that ("ab","c") and ("a","bc") differ.
  ContentHash& add_field(std::string_view bytes);
  std::string hex() const;  // 32 hex digits

 private:
  std::uint64_t a_ = 0xcbf29ce484222325ull, b_ = 0x84222325cbf29ce4ull;
};

std::uint64_t fnv1a64(std::string_view bytes);

}  // namespace ragdot::cuda
