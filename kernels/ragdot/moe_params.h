/* The argument block of the MoE layer's device permutation kernels (moe_permute.cuh), shared
   by the host, which fills it, and the kernels. Plain C: the same layout on both sides. */
#ifndef RAGDOT_MOE_PARAMS_H
#define RAGDOT_MOE_PARAMS_H

/* Pairs (token, slot) are numbered t * top_k + j. The sort is split in chunks of
   RAGDOT_MOE_CHUNK pairs, one block (one warp) each. */
#define RAGDOT_MOE_CHUNK 256
#define RAGDOT_MOE_MAX_EXPERTS 1024

typedef struct RagdotMoeSortParams {
  const int* experts;      /* [pairs] chosen expert of each pair */
  long long pairs;
  int num_experts;
  int num_chunks;          /* ceil(pairs / RAGDOT_MOE_CHUNK) */
  int* chunk_counts;       /* [num_chunks, num_experts]: pairs of expert e in chunk c, then their first row */
  int* group_sizes;        /* [num_experts] rows per expert (the ragged dots' group sizes) */
  int* row_of;             /* [pairs] sorted row of each pair */
  int* pair_of;            /* [pairs] pair of each sorted row */
  int* bad_experts;        /* count of pairs whose expert is out of range (they are given no row) */
} RagdotMoeSortParams;

typedef struct RagdotMoeRowsParams {
  const int* row_of;       /* [pairs] */
  const int* pair_of;      /* [pairs] */
  long long pairs;
  int top_k;
  long long hidden;        /* elements per row */
  int elem_bytes;          /* 2 (bf16) or 4 (f32), of x, rows and y */
  const void* x;           /* gather: [tokens, hidden] */
  const float* scale;      /* gather: [tokens] or null (Llama-4 scales the routed input) */
  void* rows;              /* gather: out, [pairs, hidden]; combine: in */
  const float* weights;    /* combine: [pairs] */
  void* y;                 /* combine: out, [tokens, hidden] */
  long long tokens;
  int accumulate;          /* combine: add to y (the shared experts' output) instead of overwriting */
} RagdotMoeRowsParams;

/* Router kinds, as ragdot::workloads::RouterKind numbers them. */
#define RAGDOT_MOE_ROUTER_SOFTMAX_TOPK 0
#define RAGDOT_MOE_ROUTER_SOFTMAX_TOPK_RENORMALIZED 1
#define RAGDOT_MOE_ROUTER_DEEPSEEK_V3 2
#define RAGDOT_MOE_ROUTER_LLAMA4 3
#define RAGDOT_MOE_MAX_TOP_K 16
#define RAGDOT_MOE_ROUTE_WARPS 4 /* tokens per block of ragdot_moe_route */

typedef struct RagdotMoeRouteParams {
  const float* logits;     /* [tokens, num_experts] */
  const float* bias;       /* [num_experts] DeepSeek-V3 selection bias, or null */
  long long tokens;
  int num_experts;
  int top_k;
  int kind;                /* RAGDOT_MOE_ROUTER_* */
  float scaling;           /* multiplies the combine weights */
  int* experts;            /* [tokens, top_k] out */
  float* weights;          /* [tokens, top_k] out */
  float* input_scale;      /* [tokens] out: Llama-4's sigmoid of the top logit, else 1 */
} RagdotMoeRouteParams;

typedef struct RagdotMoeSwigluParams {
  const void* up;          /* [rows, 2 * ffn]: gate columns, then up columns */
  void* act;               /* [rows, ffn] = silu(gate) * up */
  long long rows;
  long long ffn;
  int elem_bytes;          /* 2 (bf16) or 4 (f32) */
} RagdotMoeSwigluParams;

#endif
