#include "png_reader.hpp"

#include <cstring>

namespace ragdot::testing {

namespace {

// Bit by bit, without a table: slow and obviously right.
std::uint32_t crc32_bitwise(const std::uint8_t* p, std::size_t n) {
  std::uint32_t crc = 0xffffffffu;
  for (std::size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::uint32_t adler32_plain(const std::vector<std::uint8_t>& d) {
  std::uint64_t a = 1, b = 0;
  for (std::uint8_t x : d) {
    a = (a + x) % 65521;
    b = (b + a) % 65521;
  }
  return std::uint32_t((b << 16) | a);
}

std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
}

std::optional<PngImage> fail(std::string* error, const std::string& why) {
  if (error) *error = why;
  return std::nullopt;
}

}  // namespace

std::optional<PngImage> read_png(const std::vector<std::uint8_t>& f, std::string* error) {
  static const std::uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (f.size() < 8 || std::memcmp(f.data(), kSignature, 8) != 0) return fail(error, "no PNG signature");
  PngImage img;
  std::vector<std::uint8_t> zlib;
  bool seen_header = false, seen_end = false;
  std::size_t pos = 8;
  while (pos < f.size()) {
    if (seen_end) return fail(error, "data after IEND");
    if (pos + 12 > f.size()) return fail(error, "truncated chunk");
    const std::uint32_t len = be32(&f[pos]);
    if (pos + 12 + std::size_t(len) > f.size()) return fail(error, "chunk longer than the file");
    const std::string type(reinterpret_cast<const char*>(&f[pos + 4]), 4);
    const std::uint8_t* data = &f[pos + 8];
    if (crc32_bitwise(&f[pos + 4], len + 4) != be32(data + len)) return fail(error, "bad CRC in " + type);
    if (!seen_header && type != "IHDR") return fail(error, "first chunk is " + type + ", not IHDR");
    if (type == "IHDR") {
      if (len != 13) return fail(error, "IHDR of " + std::to_string(len) + " bytes");
      img.width = int(be32(data));
      img.height = int(be32(data + 4));
      if (img.width <= 0 || img.height <= 0) return fail(error, "empty image");
      if (data[8] != 8 || data[9] != 2) return fail(error, "not 8-bit RGB");
      if (data[10] != 0 || data[11] != 0 || data[12] != 0) return fail(error, "unknown compression/filter/interlace");
      seen_header = true;
    } else if (type == "IDAT") {
      zlib.insert(zlib.end(), data, data + len);
    } else if (type == "IEND") {
      seen_end = true;
    }
    pos += 12 + std::size_t(len);
  }
  if (!seen_end) return fail(error, "no IEND");
  if (zlib.size() < 6) return fail(error, "no image data");
  if ((zlib[0] & 0x0f) != 8 || ((zlib[0] << 8) | zlib[1]) % 31 != 0) return fail(error, "bad zlib header");

  std::vector<std::uint8_t> raw;
  std::size_t z = 2;
  while (true) {
    if (z + 5 > zlib.size()) return fail(error, "truncated deflate block");
    const std::uint8_t head = zlib[z];
    if (((head >> 1) & 3) != 0) return fail(error, "compressed deflate block (the test reader takes stored ones)");
    const unsigned len = zlib[z + 1] | (unsigned(zlib[z + 2]) << 8);
    const unsigned nlen = zlib[z + 3] | (unsigned(zlib[z + 4]) << 8);
    if ((len ^ 0xffffu) != nlen) return fail(error, "stored block LEN/NLEN mismatch");
    z += 5;
    if (z + len > zlib.size()) return fail(error, "stored block past the stream");
    raw.insert(raw.end(), zlib.begin() + std::ptrdiff_t(z), zlib.begin() + std::ptrdiff_t(z + len));
    z += len;
    if (head & 1) break;
  }
  if (z + 4 != zlib.size()) return fail(error, "bytes after the deflate stream");
  if (adler32_plain(raw) != be32(&zlib[z])) return fail(error, "bad Adler-32");

  const std::size_t stride = std::size_t(img.width) * 3;
  if (raw.size() != (stride + 1) * std::size_t(img.height)) return fail(error, "image data of the wrong size");
  for (int y = 0; y < img.height; ++y) {
    const std::uint8_t* line = &raw[std::size_t(y) * (stride + 1)];
    if (line[0] != 0) return fail(error, "scanline filter other than none");  // what the encoder writes
    img.rgb.insert(img.rgb.end(), line + 1, line + 1 + stride);
  }
  return img;
}

}  // namespace ragdot::testing
