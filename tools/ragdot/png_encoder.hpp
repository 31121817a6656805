// A minimal PNG encoder: 8-bit RGB, no filtering, zlib "stored" (uncompressed) deflate blocks.
// Files are larger than a compressing encoder's, and any PNG reader opens them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ragdot/status.hpp"

namespace ragdot::cli {

// `rgb` holds width * height pixels, row-major, 3 bytes each.
std::vector<std::uint8_t> encode_png_rgb(int width, int height, const std::vector<std::uint8_t>& rgb);

std::uint32_t crc32(const std::uint8_t* data, std::size_t size, std::uint32_t crc = 0);
std::uint32_t adler32(const std::uint8_t* data, std::size_t size);

Status write_binary_file(const std::string& path, const std::vector<std::uint8_t>& bytes);

}  // namespace ragdot::cli
