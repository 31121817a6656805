// The one argument every ragdot GPU kernel takes, by value. Plain C types only: this header is
// compiled by the host compiler (to fill it) and by NVRTC (to read it), and both must agree on
// its layout.
#pragma once

#define RAGDOT_MAX_OUTER_DIMS 6

struct RagdotKernelParams {
  const void* lhs;
  const void* rhs;
  const void* group_sizes;   // int32 or int64, [gs_rows, num_groups], on the device
  const int* group_offset;   // int32[1] on the device, or null
  void* out;
  int* tile_counter;         // wgmma family: a zeroed int32 on the device, from which CTAs take tiles in order;
                             // with the last wave split along k (split.h), then 2 x gridDim.x zeroed counters
  float* split_partials;     // wgmma with the last wave split along k: slots of f32 partial sums (split.h)
  const int* lhs_rows;       // gathered lhs: int32[m], row i of A is lhs row lhs_rows[i] (else null)
  long long lhs_table_rows;  // gathered lhs: rows of the table lhs points at (other indices read zeros)
  const int* out_rows;       // scattered rows: int32[m], row i of the product is added to table row out_rows[i]
  const float* row_scales;   // scattered rows: float32[m], row i's factor
  long long out_table_rows;  // scattered rows: rows of the f32 table out points at (other indices drop the row)

  // element strides of the per-group GEMM (see GroupGemmProblem)
  long long lhs_m, lhs_k;
  long long rhs_g, rhs_k, rhs_n;
  long long out_g, out_m, out_n;
  long long m, n, k;

  long long raster_lhs_elems;  // modes 1, 2: a group's m tiles go in blocks of this many lhs elements (raster.h)
  int tile_order;              // mode 1: RAGDOT_ORDER_PLAIN, _AUTO or _MIX (tile_order.h)
  long long ragged_extent;  // size of the ragged dim in group-size units
  long long ragged_unit;    // elements of m (mode 1) or k (mode 2) per group-size unit
  int num_groups;           // entries per group_sizes row
  int computed_groups;      // groups computed (local groups with an offset)
  int gs_is_int64;
  int gs_rows_for_check;    // rows of group_sizes (checked mode)

  // outer (batch-like) dims: gridDim.y walks their product
  int outer_rank;
  long long outer_size[RAGDOT_MAX_OUTER_DIMS];
  long long outer_lhs[RAGDOT_MAX_OUTER_DIMS];
  long long outer_rhs[RAGDOT_MAX_OUTER_DIMS];
  long long outer_out[RAGDOT_MAX_OUTER_DIMS];
  long long outer_gs[RAGDOT_MAX_OUTER_DIMS];
};
