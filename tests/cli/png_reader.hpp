// Reads the PNG files the CLI writes and checks them on the way: signature, chunk order and CRCs,
// the IHDR fields, the zlib stream (stored deflate blocks, as the encoder writes) and its Adler-32,
// and one filter byte per scanline. Written apart from the encoder, so it does not share its bugs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ragdot::testing {

struct PngImage {
  int width = 0, height = 0;
  std::vector<std::uint8_t> rgb;  // width * height * 3
};

std::optional<PngImage> read_png(const std::vector<std::uint8_t>& file, std::string* error = nullptr);

}  // namespace ragdot::testing
