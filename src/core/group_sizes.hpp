// Host-side group sizes: read (int32/int64), validate, and turn into per-row group starts.
#pragma once

#include <cstdint>
#include <vector>

#include "ragdot/status.hpp"
#include "ragdot/dtype.hpp"

namespace ragdot::core {

// Group boundaries of every group_sizes row: starts[row * (g + 1) + j] is where group j starts,
// starts[row * (g + 1) + g] where the last one ends (in ragged-dim units).
struct GroupBounds {
  std::int64_t rows = 0;
  std::int64_t groups = 0;
  std::vector<std::int64_t> starts;
  std::int64_t begin(std::int64_t row, std::int64_t j) const { return starts[std::size_t(row * (groups + 1) + j)]; }
  std::int64_t end(std::int64_t row, std::int64_t j) const { return starts[std::size_t(row * (groups + 1) + j + 1)]; }
};

// Reads `rows * groups` sizes. Every size must be >= 0 and each row's sum <= extent; the error
// names the row and group. On error `out` is left unchanged.
Status read_group_bounds(const void* group_sizes, DType dtype, std::int64_t rows, std::int64_t groups,
                         std::int64_t extent, GroupBounds& out);

// The same check without keeping the bounds, into caller-provided storage (no allocation):
// fills `starts` (rows * (groups + 1) entries).
Status compute_group_starts(const void* group_sizes, DType dtype, std::int64_t rows, std::int64_t groups,
                            std::int64_t extent, std::int64_t* starts);

// Reads and checks an int32 group offset so that [offset, offset + local) lies in [0, groups].
Status read_group_offset(const void* group_offset, std::int64_t local_groups, std::int64_t groups,
                         std::int64_t& offset);

}  // namespace ragdot::core
