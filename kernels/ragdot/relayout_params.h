/* The argument block of the cuda backend's relayout copy (relayout_copy.cuh): an operand whose
   dims are not expressible as strides of one GEMM is copied into a dense buffer first. Plain C:
   the same layout on the host, which fills it, and in the kernel. */
#ifndef RAGDOT_RELAYOUT_PARAMS_H
#define RAGDOT_RELAYOUT_PARAMS_H

#define RAGDOT_RELAYOUT_MAX_RANK 12

typedef struct RagdotRelayoutParams {
  const void* src;
  void* dst;                                        /* dense, last dim fastest */
  long long elements;                               /* product of sizes */
  long long sizes[RAGDOT_RELAYOUT_MAX_RANK];        /* of the destination, outermost first */
  long long src_strides[RAGDOT_RELAYOUT_MAX_RANK];  /* element strides of the source, per dim */
  int rank;
  int elem_bytes; /* 1, 2, 4 or 8 */
} RagdotRelayoutParams;

#endif
