#include "core/group_sizes.hpp"

#include <cstring>
#include <string>

namespace ragdot::core {

Status compute_group_starts(const void* group_sizes, DType dtype, std::int64_t rows, std::int64_t groups,
                            std::int64_t extent, std::int64_t* starts) {
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t acc = 0;
    std::int64_t* row_starts = starts + r * (groups + 1);
    for (std::int64_t j = 0; j < groups; ++j) {
      const std::int64_t idx = r * groups + j;
      std::int64_t v;
      if (dtype == DType::kI32) {
        std::int32_t x;
        std::memcpy(&x, static_cast<const char*>(group_sizes) + idx * 4, 4);
        v = x;
      } else {
        std::memcpy(&v, static_cast<const char*>(group_sizes) + idx * 8, 8);
      }
      if (v < 0) {
        return invalid_argument("group_sizes" + (rows > 1 ? "[row " + std::to_string(r) + "]" : std::string()) +
                                "[" + std::to_string(j) + "] = " + std::to_string(v) + " is negative");
      }
      row_starts[j] = acc;
      if (v > extent - acc) {
        return invalid_argument("group_sizes" + (rows > 1 ? "[row " + std::to_string(r) + "]" : std::string()) +
                                " sum to more than the ragged dimension's size " + std::to_string(extent) +
                                " (exceeded at group " + std::to_string(j) + ")");
      }
      acc += v;
    }
    row_starts[groups] = acc;
  }
  return Status::ok();
}

Status read_group_bounds(const void* group_sizes, DType dtype, std::int64_t rows, std::int64_t groups,
                         std::int64_t extent, GroupBounds& out) {
  if (dtype != DType::kI32 && dtype != DType::kI64) return unsupported("group_sizes must be int32 or int64");
  GroupBounds b;
  b.rows = rows;
  b.groups = groups;
  b.starts.resize(std::size_t(rows * (groups + 1)));
  RAGDOT_RETURN_IF_ERROR(compute_group_starts(group_sizes, dtype, rows, groups, extent, b.starts.data()));
  out = std::move(b);
  return Status::ok();
}

Status read_group_offset(const void* group_offset, std::int64_t local_groups, std::int64_t groups,
                         std::int64_t& offset) {
  if (group_offset == nullptr) return invalid_argument("this op has a group offset: group_offset must not be null");
  std::int32_t v;
  std::memcpy(&v, group_offset, 4);
  if (v < 0 || std::int64_t(v) + local_groups > groups) {
    return invalid_argument("group_offset " + std::to_string(v) + " with " + std::to_string(local_groups) +
                            " local groups is outside the " + std::to_string(groups) + " groups");
  }
  offset = v;
  return Status::ok();
}

}  // namespace ragdot::core
