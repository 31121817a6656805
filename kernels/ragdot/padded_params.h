/* The argument block of the GPU padded baseline's copy kernels (padded_copy.cuh), shared by the
   host, which fills it, and the kernels. Plain C: the same layout on both sides. */
#ifndef RAGDOT_PADDED_PARAMS_H
#define RAGDOT_PADDED_PARAMS_H

typedef struct RagdotPaddedParams {
  const void* group_sizes; /* one row of num_groups sizes, int32 or int64 */
  const int* group_offset; /* null without a group offset */
  int gs_is_int64;
  int num_groups;
  int local_groups;        /* groups computed (the rhs holds these) */
  long long extent;        /* ragged extent, in group-size units */
  long long unit;          /* rows per group-size unit */
  long long capacity;      /* rows per group in the padded buffer */
  long long rows;          /* rows of the ragged operand (gather: of the output) */
  long long cols;          /* elements per row */
  int elem_bytes;          /* 2 or 4 */
  const void* src;
  long long src_row, src_col; /* element strides */
  void* dst;
  long long dst_row, dst_col;
} RagdotPaddedParams;

#endif
