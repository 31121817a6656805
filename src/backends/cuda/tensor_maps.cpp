#include "backends/cuda/tensor_maps.hpp"

#include <algorithm>
#include <cstdint>

#include "backends/cuda/cuda_driver.hpp"

namespace ragdot::cuda {

namespace {

Status encode(CUtensorMap& map, CUtensorMapDataType type, cuuint32_t rank, const void* base, const cuuint64_t* dims,
              const cuuint64_t* strides_bytes, const cuuint32_t* box, const char* what,
              CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B) {
  const DriverApi* d = driver();
  if (!d || !d->cuTensorMapEncodeTiled) return unavailable("this CUDA driver has no cuTensorMapEncodeTiled");
  const cuuint32_t element_strides[3] = {1, 1, 1};
  RAGDOT_CU_RETURN_IF_ERROR(
      d->cuTensorMapEncodeTiled(&map, type, rank, const_cast<void*>(base), dims, strides_bytes, box, element_strides,
                                CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
      what);
  return Status::ok();
}

}  // namespace

Status encode_operand_maps(const KernelVariant& v, const core::GroupGemmProblem& p, const void* lhs, const void* rhs,
                           void* out, OperandMaps& maps) {
  const CUtensorMapDataType type =
      v.lhs == DType::kF16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  constexpr std::uint64_t kElem = 2;
  const CUtensorMapDataType out_type =
      v.out == DType::kF16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  if (v.tma_store && v.mode == 1 && p.out_elements > 0) {
    // out [m, n] (n contiguous, 16-bit): dims (n, m); boxes of 32 n x 64 m (64-byte rows, 64-byte
    // swizzle), one consumer warpgroup's rows; stores past m or n are clipped
    const cuuint64_t dims[2] = {cuuint64_t(p.n), cuuint64_t(p.m)};
    const cuuint64_t strides[1] = {cuuint64_t(p.out_m) * kElem};
    const cuuint32_t box[2] = {32, 64};
    RAGDOT_RETURN_IF_ERROR(encode(maps.out, out_type, 2, out, dims, strides, box, "cuTensorMapEncodeTiled(out)",
                                  CU_TENSOR_MAP_SWIZZLE_64B));
  } else if (v.tma_store && p.out_elements > 0) {  // (no output, no tiles: the map stays zero)
    // out [g, m, n] (n contiguous, 16-bit): dims (n, m, g) over the computed groups' blocks; boxes
    // of 64 n x 64 m, one consumer warpgroup's rows; stores past m or n are clipped
    const cuuint64_t dims[3] = {cuuint64_t(p.n), cuuint64_t(p.m),
                                cuuint64_t(std::max<std::int64_t>(p.computed_groups, 1))};
    const cuuint64_t strides[2] = {cuuint64_t(p.out_m) * kElem, cuuint64_t(p.out_g) * kElem};
    const cuuint32_t box[3] = {64, 64, 1};
    RAGDOT_RETURN_IF_ERROR(encode(maps.out, out_type, 3, out, dims, strides, box, "cuTensorMapEncodeTiled(out)"));
  }
  if (v.mode == 2) {
    // lhs [k, m] (m contiguous): dims (m, k), boxes of 64 m x 64 k (gathered rows: no map, as below)
    if (!v.gather_a) {
      const cuuint64_t a_dims[2] = {cuuint64_t(p.m), cuuint64_t(p.k)};
      const cuuint64_t a_strides[1] = {cuuint64_t(p.lhs_k) * kElem};
      const cuuint32_t a_box[2] = {64, 64};
      RAGDOT_RETURN_IF_ERROR(encode(maps.a, type, 2, lhs, a_dims, a_strides, a_box, "cuTensorMapEncodeTiled(lhs)"));
    }
    // rhs [k, n] (n contiguous): dims (n, k, 1), boxes of 64 n x 64 k; the kernel's B loads are
    // 3-D in every mode, with the group coordinate 0 here
    const cuuint64_t dims[3] = {cuuint64_t(p.n), cuuint64_t(p.k), 1};
    const cuuint64_t strides[2] = {cuuint64_t(p.rhs_k) * kElem, cuuint64_t(p.rhs_k) * cuuint64_t(p.k) * kElem};
    const cuuint32_t box[3] = {64, 64, 1};
    return encode(maps.b, type, 3, rhs, dims, strides, box, "cuTensorMapEncodeTiled(rhs)");
  }
  // A: dims (k, m); rows lhs_m elements apart; boxes of 64 k x 64 rows (the kernel loads the
  // second 64 rows of a tile only when the tile has rows there), or of 32 rows with swapped
  // operands (a tile's token rows in as many boxes as they need). Gathered rows are not TMA
  // loads: that map stays zero and the kernel never reads it.
  if (!v.gather_a) {
    const cuuint64_t a_dims[2] = {cuuint64_t(p.k), cuuint64_t(p.m)};
    const cuuint64_t a_strides[1] = {cuuint64_t(p.lhs_m) * kElem};
    const cuuint32_t a_box[2] = {64, v.swap_ab ? 32u : 64u};
    RAGDOT_RETURN_IF_ERROR(encode(maps.a, type, 2, lhs, a_dims, a_strides, a_box, "cuTensorMapEncodeTiled(lhs)"));
  }

  const std::int64_t groups = p.rhs_g > 0 ? (p.rhs_elements + p.rhs_g - 1) / p.rhs_g : 1;
  if (v.b_k_major) {  // [g, n, k]: dims (k, n, g); each CTA of an m pair loads bn / 2 rows
    const cuuint64_t dims[3] = {cuuint64_t(p.k), cuuint64_t(p.n), cuuint64_t(groups)};
    const cuuint64_t strides[2] = {cuuint64_t(p.rhs_n) * kElem, cuuint64_t(p.rhs_g) * kElem};
    const bool split = v.pairs_along_m();
    const cuuint32_t box[3] = {64, cuuint32_t(split ? v.bn / 2 : v.bn), 1};
    return encode(maps.b, type, 3, rhs, dims, strides, box, "cuTensorMapEncodeTiled(rhs)");
  }
  // [g, k, n]: dims (n, k, g)
  const cuuint64_t dims[3] = {cuuint64_t(p.n), cuuint64_t(p.k), cuuint64_t(groups)};
  const cuuint64_t strides[2] = {cuuint64_t(p.rhs_k) * kElem, cuuint64_t(p.rhs_g) * kElem};
  const cuuint32_t box[3] = {64, 64, 1};
  return encode(maps.b, type, 3, rhs, dims, strides, box, "cuTensorMapEncodeTiled(rhs)");
}

}  // namespace ragdot::cuda
