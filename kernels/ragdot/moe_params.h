/* The argument blocks of the MoE layer's device kernels (moe_permute.cuh, moe_route.cuh,
   moe_glu.cuh, moe_combine_backward.cuh, moe_accumulate.cuh), shared by the host, which fills
   them, and the kernels. Plain C: the same layout on both sides. */
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
  int* token_of;           /* [pairs] token of each sorted row (pair / top_k), or null */
  int top_k;               /* pairs per token, for token_of */
  const float* pair_weights; /* [pairs] combine weight of each pair, or null */
  float* weight_of;        /* [pairs] combine weight of each sorted row (0 past the valid rows), or null */
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
  const void* addend;      /* combine: [tokens, hidden] added to every token's sum, or null */
  const float* acc;        /* finish_combine: [tokens, hidden] f32 sums of the token's weighted rows */
  int stream_rows;         /* gather (warps): store the rows evict-first (they outgrow L2) */
  const float* pair_scale; /* gather: [pairs] or null: row r is pair_scale[pair] * x[t] instead (the
                              combine weights: the scaled dy rows of the combine's backward); not
                              with scale */
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
  /* backward (ragdot_moe_route_backward) reads logits and experts (the forward's choice) and: */
  const float* d_weights;  /* [tokens, top_k] gradient of the combine weights */
  const float* d_scale;    /* [tokens, top_k] Llama-4: gradient of the input scale, per pair (summed
                              over the token's pairs); null elsewhere */
  void* d_logits;          /* [tokens, num_experts] out, bf16 (the operand of the router's products) */
} RagdotMoeRouteParams;

/* ragdot_moe_glu and its backward: the expert FFN's gated activation (MoeConfig::activation). */
#define RAGDOT_MOE_GLU_SILU 0      /* SwiGLU */
#define RAGDOT_MOE_GLU_GELU 1      /* GeGLU, gelu through erf */
#define RAGDOT_MOE_GLU_GELU_TANH 2 /* GeGLU, gelu's tanh approximation */
typedef struct RagdotMoeGluParams {
  const void* up;          /* [rows, 2 * ffn]: gate columns, then up columns */
  void* act;               /* [rows, ffn] = a(gate) * up */
  long long rows;
  long long ffn;
  int elem_bytes;          /* 2 (bf16) or 4 (f32) */
  int activation;          /* RAGDOT_MOE_GLU_*: the a above */
  const void* d_act;       /* backward: [rows, ffn] gradient of act */
  void* d_up;              /* backward: [rows, 2 * ffn] out, gradient of [gate | up] */
  /* ragdot_moe_glu_backward_weighted: d_act holds g, each sorted row's gradient before its combine
     weight (dy of the row's token through the down projection); the kernel takes weights[pair] * g
     as the gradient of act and writes dots[pair] = act . g, the combine weight's gradient (act as
     the forward stored it, rounded to the rows' type). Rows of pair -1 get zeros and no dot. */
  const int* pair_of;      /* [rows] */
  const float* weights;    /* [pairs] */
  float* dots;             /* [pairs] out */
} RagdotMoeGluParams;

/* ragdot_moe_combine_backward: for each sorted row r of the pair (t, j),
     scaled[r] = weights[pair] * token_rows[t]      (when scaled is not null)
     dots[pair] = token_rows[t] . sorted_rows[r]    (when dots is not null)
   The combine's backward (token_rows = dy, sorted_rows = the expert outputs: the output-row and
   combine-weight gradients) and the scaled gather's (token_rows = x, sorted_rows = the row
   gradients: Llama-4's input-scale gradient). Rows past the valid ones (pair -1) get zeros. */
typedef struct RagdotMoeRowGradParams {
  const int* pair_of;      /* [rows] */
  long long rows;          /* sorted rows = pairs */
  int top_k;
  long long hidden;
  int elem_bytes;          /* 2 (bf16) or 4 (f32), of every row operand */
  const void* token_rows;  /* [tokens, hidden] */
  const void* sorted_rows; /* [rows, hidden], read only for dots */
  const float* weights;    /* [pairs], read only for scaled */
  void* scaled;            /* [rows, hidden] out, or null */
  float* dots;             /* [pairs] out, or null */
} RagdotMoeRowGradParams;

/* ragdot_moe_accumulate: y[i] += x[i] in f32, stored as the type of y (the sum of several shared
   experts' outputs or input gradients). */
typedef struct RagdotMoeAccumulateParams {
  void* y;
  const void* x;
  long long count;
  int elem_bytes;          /* 2 (bf16) or 4 (f32), of both */
} RagdotMoeAccumulateParams;

#endif
