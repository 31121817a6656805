#include "backends/cuda/kernel_variant.hpp"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "ragdot/strips.h"
#include "ragdot/tile_order.h"

namespace ragdot::cuda {

namespace {

constexpr std::int64_t kMaxGroupsPlusLocal = 8192;  // bounds the scheduler's shared memory
constexpr std::int64_t kMaxOuterCount = 65535;      // gridDim.y
constexpr int kMaxOuterRank = 6;                    // RAGDOT_MAX_OUTER_DIMS

const char* type_tag(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    default: return "?";
  }
}

bool mult8(std::int64_t x) { return x % 8 == 0; }

std::int64_t scheduler_bytes_max() { return (kMaxGroupsPlusLocal + 4) * 4 + 128; }
// The scheduler table of `groups` groups plus computed groups (-1: the largest).
std::int64_t scheduler_bytes(std::int64_t groups) {
  return groups < 0 ? scheduler_bytes_max() : (groups + 4) * 4 + 128;
}

std::int64_t mma_stage_bytes(int bm, int bn, int bk) { return std::int64_t(bm + bn) * bk * 2; }

// The deepest pipeline (2..4 stages) whose ring fits beside the largest scheduler table.
int mma_stages(int bm, int bn, int bk, const DeviceTraits& d) {
  for (int s = 4; s >= 2; --s)
    if (s * mma_stage_bytes(bm, bn, bk) + scheduler_bytes_max() <= d.max_dynamic_smem) return s;
  return 0;
}

KernelVariant mma_variant(int mode, DType in, DType out, bool a_k, bool b_k, bool small_m, const DeviceTraits& d) {
  KernelVariant v;
  v.family = KernelFamily::kMmaSync;
  v.mode = mode;
  v.lhs = v.rhs = in;
  v.out = out;
  v.a_k_major = a_k;
  v.b_k_major = b_k;
  v.bk = 64;
  if (small_m) {  // few rows per group (decode): half the wasted rows per tile
    v.bm = 64, v.bn = 128, v.warps_m = 2, v.warps_n = 2;
  } else {
    v.bm = 128, v.bn = 128, v.warps_m = 2, v.warps_n = 4;
  }
  v.stages = mma_stages(v.bm, v.bn, v.bk, d);
  return v;
}

// Hopper: BM = 128 (two consumer warpgroups of 64 rows; 160 token rows with swapped operands; 192 on
// three warpgroups with bm=192), BK = 64 (one 128-byte swizzle row). Stage count: the deepest ring
// that fits beside the largest scheduler table, the 1 KiB alignment pad and the kernel's static
// shared memory (the device's per-block limit counts both kinds).
std::int64_t wgmma_stage_bytes(int bn, int bm = 128) { return std::int64_t(bm + bn) * 64 * 2; }
// The TMA-store epilogue's staging area (kernels/ragdot/wgmma.cuh: kStagingBytes): two
// warpgroups x `buffers` buffers (two by default) x a box of 64 rows of 16-bit outputs, 64 columns
// wide in mode 2 and 32 in mode 1 (16 KiB: four stages of a 256-wide tile still fit beside it and a
// table of up to ~500 groups).
std::int64_t tma_store_staging_bytes(int mode, int buffers = 2) {
  return std::int64_t(2) * buffers * 64 * (mode == 1 ? 32 : 64) * 2;
}
// The most stages (2 to 6) of `stage_bytes` that fit beside `other_bytes`, the scheduler table of
// `groups` groups, the 1 KiB pad and the static part; 0 if not two.
int deepest_ring(std::int64_t stage_bytes, std::int64_t other_bytes, const DeviceTraits& d, std::int64_t groups) {
  for (int s = 6; s >= 2; --s)
    if (s * stage_bytes + other_bytes + scheduler_bytes(groups) + 1024 + kWgmmaStaticSmemBytes <= d.max_dynamic_smem)
      return s;
  return 0;
}
int wgmma_stages(int bn, const DeviceTraits& d, std::int64_t staging_bytes = 0, int bm = 128,
                 std::int64_t groups = -1) {
  return deepest_ring(wgmma_stage_bytes(bn, bm), staging_bytes, d, groups);
}
std::int64_t staging_bytes_of(const KernelVariant& v) {
  return v.tma_store ? tma_store_staging_bytes(v.mode, v.store_buffers) : 0;
}
constexpr std::int64_t kStripATileBytes = 128 * 64 * 2;
// The ring of a wgmma variant, as deep as fits.
// - One tile per stage: beside its staging area and the largest scheduler table; swapped operands
//   and the forward's TMA-store epilogue beside the table of `groups` groups instead (the latter's
//   staging is half as large: 4 stages of a 256-wide tile for tables up to ~500 groups, 3 beside
//   the largest; the weight gradient's takes 3 everywhere).
// - Weight-gradient strips (kernels/ragdot/strips.h): a ring of A tiles (128 x 64) beside B's
//   slots of k steps (RAGDOT_STRIP_B_BYTES), the staging area of the TMA-store epilogue if any,
//   and the table of `groups` groups (-1: the largest; 4 A tiles then, 5 for tables of up to
//   ~4300 groups, 6 up to ~220; with the staging area, 2 and 3).
int ring_stages(const KernelVariant& v, const DeviceTraits& d, std::int64_t groups) {
  if (v.strips) return deepest_ring(kStripATileBytes, RAGDOT_STRIP_B_BYTES + staging_bytes_of(v), d, groups);
  const bool table_aware = (v.tma_store && v.mode == 1) || v.swap_ab;  // as swapped() counts them
  return wgmma_stages(v.bn, d, staging_bytes_of(v), v.bm, table_aware ? groups : -1);
}

KernelVariant in_strips(KernelVariant v, const DeviceTraits& d, std::int64_t groups = -1) {
  v.strips = true;
  v.stages = ring_stages(v, d, groups);
  return v;
}

// Token rows of a swapped-operand tile (its largest wgmma N), and the step of its N.
constexpr int kSwapRows = 160, kSwapStep = 16;

// The swapped-operand variant of a mode 1 wgmma variant: 256 weight columns by up to 160 token
// rows, in as many stages as fit beside the scheduler table of `groups` groups (-1: the largest;
// 3 stages of 52 KiB then, 4 for tables up to about 4000 groups).
KernelVariant swapped(KernelVariant v, const DeviceTraits& d, std::int64_t groups = -1) {
  v.swap_ab = true;
  v.bn = 256;
  v.bm = kSwapRows;
  v.stages = wgmma_stages(v.bn, d, 0, v.bm, groups);
  return v;
}
// Swapped tiles in CTA pairs along m (cluster=2): a pair takes the next two 160-row tiles of all
// the groups in order, and where both lie in one group (a large group's consecutive tiles) its
// CTAs share the weight tile through TMA multicast, each loading half. Groups of one tile, as in
// deepseek-v3's uniform prefill, pair across groups and share nothing; a skewed router's hot
// experts, whose weight tiles one CTA per tile streams out of L2 once per 160 rows, read them
// half as often. Opt-in: on an H100 it cut the skewed case's L2 reads by 9% at the same time, and
// the uniform case ran 5% slower (bench/RESULTS.md, 2026-12-07 15:30 UTC).
bool swapped_pair(const KernelVariant& v) { return v.cluster == 2 && !v.cluster_along_n; }

// The plain tile of a swapped-operand variant (the override's swap=off, or keys a swapped tile
// cannot take), its stages refitted.
KernelVariant unswapped(KernelVariant v, const DeviceTraits& d, std::int64_t groups) {
  v.swap_ab = false;
  v.bm = 128;
  v.stages = ring_stages(v, d, groups);
  return v;
}

// Gathered rows in CTA pairs along n (kernels/ragdot/wgmma.cuh, produce_gathered_pair): each CTA
// of a pair gathers half of the tile's rows with cp.async and sends it to the other, so an SM's
// cp.async copies, which alone fall behind the tensor cores, carry half the rows. For 256-wide
// tiles with 16-bit outputs of the input type (the MoE layer's up projection; CI compiles those)
// and three stages or more (what the GPU tests have run); the planner pairs them where n's column
// tiles pair up (column_tiles_pair_up).
bool pairs_gathered_rows(const KernelVariant& v) {
  return v.gather_a && v.mode == 1 && v.bn == 256 && v.out == v.lhs && v.out != DType::kF32 && !v.scatter_out &&
         !v.split_tail && !v.tma_store && v.stages >= 3;
}
// A pair takes two adjacent column tiles. With an odd number of them the last pair of every row
// block has a CTA without columns that still gathers and sends its half of the rows, an SM's time
// spent on no outputs: on an H100, qwen3-30b-a3b's 768-column data gradient (three tiles) on rows
// gathered from dy took 0.520 ms in pairs against 0.419 on one CTA per tile (8192 tokens), while
// its 1536-column up projection (six tiles) gains from them (bench/RESULTS.md, 2026-12-06).
bool column_tiles_pair_up(std::int64_t n, int bn) {
  const std::int64_t tiles = (n + bn - 1) / bn;
  return tiles >= 2 && tiles % 2 == 0;
}
// The forward's TMA-store epilogue applies to the plain epilogue with 16-bit outputs of the input
// type (the SwiGLU and table-row epilogues have their own; CI compiles no mixed types there).
bool forward_tma_store_applies(const KernelVariant& v) {
  return v.mode == 1 && !v.swiglu && !v.scatter_out && v.out == v.lhs && v.out != DType::kF32;
}
// Overlapped stores (kOverlapStore): the Hopper family's plain mode 1 epilogue with 16-bit
// outputs on whole tiles (the swapped tile's accumulators leave no room for its words, split
// tiles store from the piece that arrives last, and the other epilogues have their own stores).
// Its consumers take 232 registers, leaving the producer 40: enough for the TMA producer of [G, K, N]
// weights on one CTA or in pairs along n, not for K-major weights', gathered rows' or pairs along
// m's producers (ptxas spills there).
bool overlap_store_applies(const KernelVariant& v) {
  return v.family == KernelFamily::kWgmma && v.mode == 1 && v.warps_m == 2 && !v.swap_ab && !v.split_tail && !v.tma_store &&
         !v.swiglu && !v.scatter_out && v.out != DType::kF32 && !v.b_k_major && !v.gather_a && !v.pairs_along_m();
}
// Three consumer warpgroups (kernels/ragdot/wgmma.cuh, kConsumers): the plain mode 1 tile on one
// CTA, whole, without gathered rows or an epilogue of its own (each of those counts on two).
bool three_consumers_apply(const KernelVariant& v) {
  return v.family == KernelFamily::kWgmma && v.mode == 1 && !v.swap_ab && !v.gather_a && !v.swiglu &&
         !v.scatter_out && !v.split_tail && !v.tma_store && !v.strips && v.cluster == 1 && v.bn <= 192;
}
// The 192-row tile of a plain mode 1 variant: three consumer warpgroups of 64 rows, at most 192
// columns (each consumer has 152 registers: 96 accumulators, not 128), in as many stages as fit.
KernelVariant with_192_rows(KernelVariant v, const DeviceTraits& d, std::int64_t groups = -1) {
  v.bm = 192;
  v.warps_m = 3;
  v.bn = std::min(v.bn, 192);
  v.stages = ring_stages(v, d, groups);
  return v;
}
KernelVariant in_gathered_pairs(KernelVariant v) {
  v.cluster = 2;
  v.cluster_along_n = true;
  return v;
}

// Mode 1: A K-major (token rows), B either layout. Mode 2: both MN-major (token rows are k).
KernelVariant wgmma_variant(int mode, DType in, DType out, bool b_k, int bn, const DeviceTraits& d,
                            bool gather_a = false) {
  KernelVariant v;
  v.family = KernelFamily::kWgmma;
  v.mode = mode;
  v.lhs = v.rhs = in;
  v.out = out;
  v.a_k_major = mode == 1;
  v.b_k_major = mode == 1 && b_k;
  v.bm = 128, v.bn = bn, v.bk = 64;
  v.warps_m = 2, v.warps_n = 1;  // consumer warpgroups
  v.stages = wgmma_stages(bn, d);
  v.gather_a = gather_a;  // mode 1: the rows of A (m); mode 2: its k rows
  return v;
}

bool is_hopper(const DeviceTraits& d) { return d.cc_major == 9 && d.cc_minor == 0; }

// The variant's one wgmma instruction (m64 x bn x k16, f32 accumulators), written out: inline
// PTX needs every accumulator register named.
std::string wgmma_instruction(const KernelVariant& v) {
  const int regs = v.bn / 2;
  const char* in = v.lhs == DType::kF16 ? "f16" : "bf16";
  std::ostringstream s;
  s << "struct Mma {\n"
    << "  static __device__ __forceinline__ void run(float (&d)[" << regs
    << "], unsigned long long desc_a, unsigned long long desc_b, int accumulate) {\n"
    << "    asm volatile(\n"
    << "        \"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" << regs + 2 << ", 0;\\n\"\n"
    << "        \"wgmma.mma_async.sync.aligned.m64n" << v.bn << "k16.f32." << in << '.' << in << " {";
  for (int i = 0; i < regs; ++i) s << (i ? ", " : "") << '%' << i;
  s << "}, %" << regs << ", %" << regs + 1 << ", p, 1, 1, " << (v.a_k_major ? 0 : 1) << ", " << (v.b_k_major ? 0 : 1)
    << ";\\n}\\n\"\n"
    << "        : ";
  for (int i = 0; i < regs; ++i) s << (i ? ", " : "") << "\"+f\"(d[" << i << "])";
  s << "\n        : \"l\"(desc_a), \"l\"(desc_b), \"r\"(accumulate));\n"
    << "  }\n"
    << "};\n";
  return s.str();
}

// The swapped-operand variant's instructions: out^T = W^T x^T, wgmma's A a 64-column slice of the
// weights (K-major for [E, N, K] weights, else MN-major), its B the tile's token rows (K-major),
// its N the tile's rows rounded up to a step of 16: one instruction pair per N, a compile-time
// choice (the kernel picks a whole k loop per tile: a choice of instruction inside the loop makes
// ptxas serialize the wgmma pipeline). One accumulator array holds both of a warpgroup's slices,
// each N / 2 registers of its half.
std::string swapped_instructions(const KernelVariant& v) {
  const char* in = v.lhs == DType::kF16 ? "f16" : "bf16";
  const int half = kSwapRows / 2;  // accumulators per slice
  std::ostringstream s;
  // one wgmma of slice `slice` with n rows (its accumulators from slice * half), as inline PTX
  auto instruction = [&](int n, int slice) {
    const int regs = n / 2;
    s << "        asm volatile(\n"
      << "            \"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" << regs + 2 << ", 0;\\n\"\n"
      << "            \"wgmma.mma_async.sync.aligned.m64n" << n << "k16.f32." << in << '.' << in << " {";
    for (int i = 0; i < regs; ++i) s << (i ? ", " : "") << '%' << i;
    s << "}, %" << regs << ", %" << regs + 1 << ", p, 1, 1, " << (v.b_k_major ? 0 : 1) << ", 0;\\n}\\n\"\n"
      << "            : ";
    for (int i = 0; i < regs; ++i) s << (i ? ", " : "") << "\"+f\"(d[" << slice * half + i << "])";
    s << "\n            : \"l\"(desc_a" << slice << "), \"l\"(desc_b), \"r\"(1));\n";
  };
  s << "struct Mma {\n"
    << "  static constexpr int kMaxRows = " << kSwapRows << ", kRowStep = " << kSwapStep << ";\n"
    << "  // both slices' k16 step: slice s's 64 columns (desc_a<s>) by the tile's kN rows (desc_b)\n"
    << "  template <int kN>\n"
    << "  static __device__ __forceinline__ void run(float (&d)[" << 2 * half
    << "], unsigned long long desc_a0, unsigned long long desc_a1, unsigned long long desc_b) {\n";
  for (int n = kSwapStep; n <= kSwapRows; n += kSwapStep) {
    s << "    " << (n == kSwapStep ? "" : "else ") << "if constexpr (kN == " << n << ") {\n";
    instruction(n, 0);
    instruction(n, 1);
    s << "    }\n";
  }
  s << "  }\n"
    << "};\n";
  return s.str();
}

KernelVariant simt_variant(int mode, DType lhs, DType rhs, DType out) {
  KernelVariant v;
  v.family = KernelFamily::kSimt;
  v.mode = mode;
  v.lhs = lhs, v.rhs = rhs, v.out = out;
  v.a_k_major = v.b_k_major = false;  // not a compile-time property of this family
  v.bm = 64, v.bn = 64, v.bk = 16, v.tm = 4, v.tn = 4;
  v.warps_m = v.warps_n = 0;
  v.stages = 1;
  return v;
}

bool is_16bit_float(DType t) { return t == DType::kBF16 || t == DType::kF16; }
bool is_float(DType t) { return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32; }

// Whether the planner swaps operands for a mode 1 op (plain epilogue, outputs of the input type):
// about one swapped tile's rows per group (deepseek-v3's prefill, ~128 +- 20 rows in each of 256
// experts) and wide enough weights for the tile's 256 columns. There the swapped tile reads each
// group's weights once instead of once per 128-row tile, and multiplies at most 15 rows for
// nothing instead of up to 63: on an H200, deepseek-v3's up projection 4.33-4.54 ms against 5.00,
// its down projection 2.30 against 2.58 (bench/RESULTS.md, 2026-12-06). Fewer rows per group are
// decode, bound by the weights' bytes either way; more fill plain tiles well (qwen3's 512 rows per
// group: swapped tiles lost 1-9%).
bool swapped_operands_pay(const core::GroupGemmProblem& p) {
  const std::int64_t rows = p.m / std::max<std::int64_t>(p.computed_groups, 1);
  return rows >= 96 && rows <= kSwapRows && p.n >= 1024 && p.k >= 512 && p.out_dtype == p.lhs_dtype &&
         is_16bit_float(p.out_dtype) && !p.swiglu_epilogue && !p.out_scatter_rows;
}

// Rows per group up to which the weight gradient runs in strips by default: a group's k steps
// then stay resident in B's four slots (256 rows at bn 256) with room for the spread of a
// balanced router (deepseek-v3: 128 +- 11 rows). Larger groups stream B per k step anyway, and
// the plain kernel does that better (mixtral's 1024-row groups: 3.46 against 3.86 ms in strips,
// bench/RESULTS.md 2026-12-06).
constexpr std::int64_t kStripRowsPerGroup = 192;

// Strips are long units (up to 16 tiles): fewer than two per SM would leave SMs idle that one
// tile per unit keeps busy.
constexpr std::int64_t kStripUnitsPerSmAtLeast = 2;

// Whether the weight gradient goes in strips: small groups, several m tiles to share B across,
// enough strips to fill the GPU, and the 16-bit form compiled for every scheduler table
// (all_variants).
bool strips_pay(const core::GroupGemmProblem& p, const DeviceTraits& d) {
  // k spans all groups; with a group offset the other groups' rows are often left out (an expert-
  // parallel rank's), so the local groups' mean is the safer guess there
  const std::int64_t groups = std::max<std::int64_t>(p.has_group_offset ? p.computed_groups : p.num_groups, 1);
  if (p.k / groups > kStripRowsPerGroup || p.m <= 128 || p.n < 256 || p.lhs_dtype != DType::kBF16 ||
      p.out_dtype != DType::kBF16 || p.lhs_gather_rows)
    return false;
  // (m and n are below 2^31, choose_variant's rule, so their tile counts fit an int)
  const int slots = ragdot_strip_b_slots(256);  // (a resident group's units: its strips)
  const std::int64_t units = p.computed_groups * ragdot_strip_units(slots, slots, (int)((p.m + 127) / 128),
                                                                    (int)((p.n + 255) / 256));
  return units >= kStripUnitsPerSmAtLeast * std::max(d.sm_count, 1);
}

}  // namespace

int KernelVariant::threads() const {
  if (family == KernelFamily::kWgmma) return 128 * (1 + warps_m);  // producer warpgroup + consumer warpgroups
  return family == KernelFamily::kMmaSync ? 32 * warps_m * warps_n : (bm / tm) * (bn / tn);
}

std::int64_t KernelVariant::dynamic_smem_bytes(std::int64_t groups, std::int64_t local_groups) const {
  const std::int64_t sched = ((groups + 1) + (local_groups + 4)) * 4;  // Scheduler::smem_bytes
  const std::int64_t sched_aligned = (sched + 127) / 128 * 128;
  if (family == KernelFamily::kMmaSync) return sched_aligned + stages * mma_stage_bytes(bm, bn, bk);
  if (family == KernelFamily::kWgmma && strips)
    return sched + 1024 + stages * kStripATileBytes + std::int64_t(ragdot_strip_b_slots(bn)) * bn * 64 * 2 +
           staging_bytes_of(*this);
  if (family == KernelFamily::kWgmma)
    return sched + 1024 + stages * wgmma_stage_bytes(bn, bm) + staging_bytes_of(*this);
  return sched_aligned;
}

std::string KernelVariant::name() const {
  std::ostringstream s;
  s << (family == KernelFamily::kMmaSync ? "mma_sync" : family == KernelFamily::kWgmma ? "wgmma" : "simt") << ' ' << dtype_name(lhs) << '*' << dtype_name(rhs)
    << "->" << dtype_name(out) << " mode" << mode;
  if (family != KernelFamily::kSimt) s << " A:" << (a_k_major ? 'K' : 'M') << " B:" << (b_k_major ? 'K' : 'N');
  s << ' ' << bm << 'x' << bn << 'x' << bk;
  if (family == KernelFamily::kMmaSync) s << " w" << warps_m << 'x' << warps_n << " s" << stages;
  else if (family == KernelFamily::kWgmma)
    s << " tma s" << stages << (gather_a ? " gatherA" : "")
      << (cluster > 1 ? " cluster" + std::to_string(cluster) + (cluster == 2 && cluster_along_n ? "n" : "") : "")
      << (tma_store ? " tmastore" : "") << (tma_store && store_buffers != 2 ? " b" + std::to_string(store_buffers) : "")
      << (swiglu ? " swiglu" : "") << (scatter_out ? " scatter" : "")
      << (split_tail ? " splittail" : "") << (swap_ab ? " swapAB" : "") << (strips ? " strips" : "")
      << (pingpong ? " pingpong" : "") << (overlap_store ? " overlapstore" : "");
  else s << " t" << tm << 'x' << tn;
  return s.str();
}

std::string generate_source(const KernelVariant& v) {
  std::ostringstream s;
  s << "// ragdot generated kernel: " << v.name() << "\n";
  if (v.family == KernelFamily::kWgmma) {
    s << (v.strips ? "#include \"ragdot/wgmma_strips.cuh\"\n\n" : "#include \"ragdot/wgmma.cuh\"\n\n")
      << "struct V {\n"
      << "  static constexpr int kMode = " << v.mode << ", kBN = " << v.bn << ", kStages = " << v.stages << ";\n"
      << "  static constexpr int kConsumers = " << v.warps_m << ";\n"
      << "  static constexpr bool kBKMajor = " << (v.b_k_major ? "true" : "false") << ";\n"
      << "  static constexpr bool kGatherA = " << (v.gather_a ? "true" : "false") << ";\n"
      << "  static constexpr int kCluster = " << v.cluster << ";\n"
      << "  static constexpr bool kClusterAlongN = " << (v.cluster_along_n ? "true" : "false") << ";\n"
      << "  static constexpr bool kTmaStore = " << (v.tma_store ? "true" : "false") << ";\n"
      << "  static constexpr int kStoreBuffers = " << v.store_buffers << ";\n"
      << "  static constexpr bool kSwiglu = " << (v.swiglu ? "true" : "false") << ";\n"
      << "  static constexpr bool kScatterOut = " << (v.scatter_out ? "true" : "false") << ";\n"
      << "  static constexpr bool kSplitTail = " << (v.split_tail ? "true" : "false") << ";\n"
      << "  static constexpr bool kSwapAB = " << (v.swap_ab ? "true" : "false") << ";\n"
      << "  static constexpr bool kStrips = " << (v.strips ? "true" : "false") << ";\n"
      << "  static constexpr bool kPingPong = " << (v.pingpong ? "true" : "false") << ";\n"
      << "  static constexpr bool kOverlapStore = " << (v.overlap_store ? "true" : "false") << ";\n"
      << "  typedef ragdot::" << type_tag(v.lhs) << " In;\n"
      << "  typedef ragdot::" << type_tag(v.out) << " Out;\n"
      << "};\n\n"
      << (v.swap_ab ? swapped_instructions(v) : wgmma_instruction(v)) << "\n"
      << "extern \"C\" __global__ void "
      << (v.cluster > 1 ? "__cluster_dims__(" + std::to_string(v.cluster) + ", 1, 1) " : std::string())
      << "__launch_bounds__(" << v.threads() << ", 1) " << kKernelEntry
      << "(const RagdotKernelParams p, const __grid_constant__ ragdot::hopper::TensorMap map_a,\n"
      << "    const __grid_constant__ ragdot::hopper::TensorMap map_b"
      << (v.tma_store ? ", const __grid_constant__ ragdot::hopper::TensorMap map_out" : "") << ") {\n"
      << "  extern __shared__ __align__(1024) unsigned char ragdot_dynamic_smem[];\n"
      << (v.strips ? "  ragdot::hopper::Strips<V, Mma>::run(p, &map_a, &map_b, ragdot_dynamic_smem"
                   : "  ragdot::hopper::Kernel<V, Mma>::run(p, &map_a, &map_b, ragdot_dynamic_smem")
      << (v.tma_store ? ", &map_out" : "") << ");\n"
      << "}\n";
  } else if (v.family == KernelFamily::kMmaSync) {
    s << "#include \"ragdot/mma_sync.cuh\"\n\n"
      << "struct V {\n"
      << "  static constexpr int kMode = " << v.mode << ";\n"
      << "  static constexpr int kBM = " << v.bm << ", kBN = " << v.bn << ", kBK = " << v.bk << ";\n"
      << "  static constexpr int kWarpsM = " << v.warps_m << ", kWarpsN = " << v.warps_n << ";\n"
      << "  static constexpr int kStages = " << v.stages << ";\n"
      << "  static constexpr bool kAKMajor = " << (v.a_k_major ? "true" : "false") << ";\n"
      << "  static constexpr bool kBKMajor = " << (v.b_k_major ? "true" : "false") << ";\n"
      << "  typedef ragdot::" << type_tag(v.lhs) << " In;\n"
      << "  typedef ragdot::" << type_tag(v.out) << " Out;\n"
      << "};\n\n"
      << "extern \"C\" __global__ void __launch_bounds__(" << v.threads() << ", 1) " << kKernelEntry
      << "(const RagdotKernelParams p) {\n"
      << "  extern __shared__ __align__(128) unsigned char ragdot_dynamic_smem[];\n"
      << "  ragdot::mma::Kernel<V>::run(p, ragdot_dynamic_smem);\n"
      << "}\n";
  } else {
    s << "#include \"ragdot/simt.cuh\"\n\n"
      << "struct V {\n"
      << "  static constexpr int kMode = " << v.mode << ";\n"
      << "  static constexpr int kBM = " << v.bm << ", kBN = " << v.bn << ", kBK = " << v.bk << ";\n"
      << "  static constexpr int kTM = " << v.tm << ", kTN = " << v.tn << ";\n"
      << "  typedef ragdot::" << type_tag(v.lhs) << " Lhs;\n"
      << "  typedef ragdot::" << type_tag(v.rhs) << " Rhs;\n"
      << "  typedef ragdot::" << type_tag(v.out) << " Out;\n"
      << "};\n\n"
      << "extern \"C\" __global__ void __launch_bounds__(" << v.threads() << ") " << kKernelEntry
      << "(const RagdotKernelParams p) {\n"
      << "  extern __shared__ __align__(128) unsigned char ragdot_dynamic_smem[];\n"
      << "  ragdot::simt::Kernel<V>::run(p, ragdot_dynamic_smem);\n"
      << "}\n";
  }
  s << "\n#include \"ragdot/check_group_sizes.cuh\"\n";
  return s.str();
}

std::string arch_for(const DeviceTraits& d) {
  std::string a = "sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor);
  if (d.cc_major == 9 && d.cc_minor == 0) a += "a";
  return a;
}

Result<KernelVariant> choose_variant(const core::GroupGemmProblem& p, const DeviceTraits& d, bool wgmma_small_groups) {
  if (!p.reduce.empty()) return unsupported("group sizes vary along a contracted dimension");
  if (int(p.outer.size()) > kMaxOuterRank) return unsupported("more than 6 batch-like dimensions");
  if (p.outer_count() > kMaxOuterCount) return unsupported("more than 65535 batch entries");
  if (p.num_groups + p.computed_groups > kMaxGroupsPlusLocal) return unsupported("more than 8192 groups");
  constexpr std::int64_t kMax32 = (std::int64_t(1) << 31) - 1;
  if (p.m > kMax32 || p.n > kMax32 || p.k > kMax32 || p.ragged_extent > kMax32)
    return unsupported("a dimension of 2^31 or more");
  if (!is_float(p.lhs_dtype) || !is_float(p.rhs_dtype) || !is_float(p.out_dtype))
    return unsupported("dtypes other than f32, bf16, f16");
  if (d.cc_major < 7) return unsupported("GPUs older than sm_70");

  const int mode = p.mode == RaggedMode::kNonContracting ? 1 : p.mode == RaggedMode::kContracting ? 2 : 3;
  bool mma = d.cc_major >= 8 && p.lhs_dtype == p.rhs_dtype && is_16bit_float(p.lhs_dtype) && p.out_n == 1 &&
             mult8(p.out_m) && mult8(p.n) && mult8(p.out_g);
  for (const auto& o : p.outer) mma = mma && mult8(o.lhs) && mult8(o.rhs) && mult8(o.out);
  bool a_k = p.lhs_k == 1, b_k = p.rhs_k == 1;
  const bool a_k_ok = p.lhs_k == 1 && mult8(p.lhs_m) && mult8(p.k);
  const bool a_m_ok = p.lhs_m == 1 && mult8(p.lhs_k) && mult8(p.m);
  const bool b_k_ok = p.rhs_k == 1 && mult8(p.rhs_n) && mult8(p.k) && mult8(p.rhs_g);
  const bool b_n_ok = p.rhs_n == 1 && mult8(p.rhs_k) && mult8(p.rhs_g);
  if (mode == 1) {
    // ragged rows start anywhere: A must be K-major so that 16-byte loads stay aligned
    mma = mma && a_k_ok && (b_k_ok || b_n_ok);
    a_k = true;
    b_k = b_k_ok;
  } else if (mode == 2) {
    // the group boundary runs along k: both operands must step k by whole rows
    mma = mma && a_m_ok && b_n_ok;
    a_k = false;
    b_k = false;
  } else {
    mma = mma && (a_k_ok || a_m_ok) && (b_k_ok || b_n_ok);
    a_k = a_k_ok;
    b_k = b_k_ok;
  }
  const std::int64_t groups = std::max<std::int64_t>(p.computed_groups, 1);
  // Fewer than ~96 rows per group (decode): the weights' bytes bound the time. On Hopper the wgmma
  // family streams them through TMA faster than mma.sync's cp.async (H200: deepseek-v3 decode
  // 3.43 against 4.30 ms, mixtral 0.45 against 0.51-0.65 ms, bench/RESULTS.md), so it takes
  // those too unless told otherwise; elsewhere mma.sync's 64-row tile halves the wasted rows.
  const bool small_m = mode == 1 && p.m / groups < 96;
  // Hopper: the TMA + wgmma family takes the MoE forward and data-gradient GEMMs (mode 1) and
  // the weight gradient (mode 2), one batch. Tensor maps need 16-byte strides, which the mma
  // rules (multiples of 8) already imply.
  const bool wgmma_mode1 = mode == 1 && (!small_m || wgmma_small_groups) && p.rhs_g > 0;
  const bool gather = p.lhs_gather_rows.has_value();
  // an empty table makes every row zero, and may be a null pointer: the caller's to skip
  if (gather && *p.lhs_gather_rows < 1) return unsupported("gathered lhs rows from an empty table");
  if (p.out_scatter_rows) {
    // only the Hopper family adds its rows into a table (vector reductions from its epilogue)
    if (!(mma && wgmma_mode1 && is_hopper(d) && p.is_single_batch() && is_16bit_float(p.out_dtype)))
      return unsupported("adding rows into a table needs the Hopper wgmma family (sm_90a, 16-bit inputs and outputs)");
    KernelVariant v = wgmma_variant(mode, p.lhs_dtype, p.out_dtype, b_k, p.n >= 256 ? 256 : 128, d, gather);
    v.scatter_out = true;
    if (v.stages >= 2) return v;
    return unsupported("the scattering tile does not fit in shared memory");
  }
  if (p.swiglu_epilogue) {
    // only the Hopper family has the epilogue: its tile loads gate and up boxes of an [G, K, N] rhs
    if (!(mma && wgmma_mode1 && is_hopper(d) && p.is_single_batch() && !b_k && is_16bit_float(p.out_dtype)))
      return unsupported("the SwiGLU epilogue needs the Hopper wgmma family (sm_90a, 16-bit inputs and outputs, "
                         "rhs [G, K, N], N / 2 a multiple of 8)");
    KernelVariant v = wgmma_variant(mode, p.lhs_dtype, p.out_dtype, b_k, p.n >= 256 ? 256 : 128, d, gather);
    v.swiglu = true;
    if (column_tiles_pair_up(p.n, v.bn) && pairs_gathered_rows(v)) return in_gathered_pairs(v);
    if (v.stages >= 2) return v;
    return unsupported("the SwiGLU epilogue's tile does not fit in shared memory");
  }
  if (mma && (wgmma_mode1 || mode == 2) && is_hopper(d) && p.is_single_batch()) {
    KernelVariant v = wgmma_variant(mode, p.lhs_dtype, p.out_dtype, b_k, p.n >= 256 ? 256 : 128, d, gather);
    if (v.stages >= 2 && mode == 1 && !gather && swapped_operands_pay(p))
      return swapped(v, d, compiled_table_for(p.num_groups + p.computed_groups));
    if (v.stages >= 2 && mode == 2 && strips_pay(p, d))  // (n >= 256: v's tile is 256 wide)
      return in_strips(v, d, compiled_table_for(p.num_groups + p.computed_groups));
    if (column_tiles_pair_up(p.n, v.bn) && pairs_gathered_rows(v)) return in_gathered_pairs(v);
    if (v.stages >= 2) return v;
  }
  // Only the wgmma family reads A through a row index; elsewhere the caller gathers first.
  if (gather) {
    return unsupported("gathered lhs rows need the Hopper wgmma family (sm_90a, 16-bit inputs, one batch)");
  }
  if (mma) {
    KernelVariant v = mma_variant(mode, p.lhs_dtype, p.out_dtype, a_k, b_k, small_m, d);
    if (v.stages >= 2) return v;
  }
  return simt_variant(mode, p.lhs_dtype, p.rhs_dtype, p.out_dtype);
}

Result<VariantSpec> parse_variant_spec(const std::string& spec) {
  VariantSpec out;
  std::istringstream items(spec);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string text = eq == std::string::npos ? "" : item.substr(eq + 1);
    // the keys that take one of two words
    struct Choice {
      const char* key;
      const char* yes;
      const char* no;
    };
    static constexpr Choice kChoices[] = {
        {"small_groups", "wgmma", "mma"}, {"epilogue", "tma", "direct"}, {"swap", "ab", "off"}, {"split", "tail", "off"},
        {"strips", "on", "off"}, {"pingpong", "on", "off"}, {"overlap", "on", "off"}};
    const Choice* choice = std::find_if(std::begin(kChoices), std::end(kChoices),
                                        [&](const Choice& c) { return key == c.key; });
    if (choice != std::end(kChoices)) {
      if (text != choice->yes && text != choice->no)
        return invalid_argument(std::string("RAGDOT_CUDA_VARIANT: ") + choice->key + " must be " + choice->yes +
                                " or " + choice->no + ", got '" + text + "'");
      const bool yes = text == choice->yes;
      if (key == "small_groups") out.small_groups_on_wgmma = yes;
      else if (key == "epilogue") out.tma_store = yes;
      else if (key == "swap") out.swap_ab = yes;
      else if (key == "strips") out.strips = yes;
      else if (key == "pingpong") out.pingpong = yes;
      else if (key == "overlap") out.overlap_store = yes;
      else out.split_tail = yes;
      continue;
    }
    if (key == "order") {
      if (text != "plain" && text != "auto" && text != "mix")
        return invalid_argument("RAGDOT_CUDA_VARIANT: order must be plain, auto or mix, got '" + text + "'");
      out.tile_order = text == "plain" ? RAGDOT_ORDER_PLAIN : text == "auto" ? RAGDOT_ORDER_AUTO : RAGDOT_ORDER_MIX;
      continue;
    }
    if (key == "cluster") {
      if (text != "1" && text != "2" && text != "2n" && text != "4")
        return invalid_argument(
            "RAGDOT_CUDA_VARIANT: cluster must be 1, 2 (pairs along m), 2n (along n) or 4 (2 x 2), got '" + text + "'");
      out.cluster = text == "1" ? 1 : text == "4" ? 4 : 2;
      out.cluster_along_n = text == "2n";
      continue;
    }
    // the key first: an unknown key says so whatever its value
    if (key != "bn" && key != "bm" && key != "stages" && key != "ctas" && key != "raster" && key != "buffers")
      return invalid_argument("RAGDOT_CUDA_VARIANT: unknown key '" + key +
                              "' (known: bn, bm, stages, cluster, epilogue, buffers, split, swap, strips, pingpong, "
                              "overlap, order, ctas, small_groups, raster)");
    char* end = nullptr;
    const long value = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0') return invalid_argument("RAGDOT_CUDA_VARIANT: '" + item + "' is not key=integer");
    if (key == "bn") {
      if (value < 64 || value > 256 || value % 64 != 0) return invalid_argument("RAGDOT_CUDA_VARIANT: bn must be 64, 128, 192 or 256, got " + text);
      out.bn = int(value);
    } else if (key == "bm") {
      if (value != 128 && value != 192) return invalid_argument("RAGDOT_CUDA_VARIANT: bm must be 128 or 192, got " + text);
      out.bm = int(value);
    } else if (key == "stages") {
      if (value < 2 || value > 8) return invalid_argument("RAGDOT_CUDA_VARIANT: stages must be 2 to 8, got " + text);
      out.stages = int(value);
    } else if (key == "buffers") {
      if (value < 2 || value > 4) return invalid_argument("RAGDOT_CUDA_VARIANT: buffers must be 2 to 4, got " + text);
      out.store_buffers = int(value);
    } else if (key == "ctas") {
      if (value < 1 || value > (1l << 20))
        return invalid_argument("RAGDOT_CUDA_VARIANT: ctas must be 1 to 1048576, got '" + text + "'");
      out.ctas = int(value);
    } else if (key == "raster") {
      if (value < 0 || value > (1l << 22))
        return invalid_argument("RAGDOT_CUDA_VARIANT: raster must be 0 (off) or KiB of L2 up to 4 GiB, got '" + text +
                                "'");
      out.raster_bytes = std::int64_t(value) << 10;
    }
  }
  return out;
}

Result<KernelVariant> override_variant(const KernelVariant& v, const VariantSpec& spec, const DeviceTraits& d,
                                       std::int64_t groups) {
  // A key the chosen family does not have leaves it as it is: one setting can then stand for a
  // whole program whose ops land on different families.
  KernelVariant out = v;
  // A variant the planner swapped (swapped_operands_pay) given keys a swapped tile cannot take,
  // without swap=ab: those keys ask for the plain tile, as they would on any other op.
  const bool asks_plain_tile = (spec.cluster && *spec.cluster > 1) || (spec.split_tail && *spec.split_tail) ||
                               (spec.tma_store && *spec.tma_store) || (spec.bn && *spec.bn != 256) ||
                               (spec.bm && *spec.bm == 192);
  if (out.swap_ab && asks_plain_tile && !(spec.swap_ab && *spec.swap_ab)) out = unswapped(out, d, groups);
  // Likewise a gathered pair the planner chose, given keys that run a tile on one CTA and apply to
  // it (the TMA-store epilogue only to the plain one); cluster=2 and 4 do not ask for the pair.
  const bool asks_one_cta =
      (spec.split_tail && *spec.split_tail) || (spec.tma_store && *spec.tma_store && forward_tma_store_applies(out));
  if (out.gather_a && out.cluster > 1 && asks_one_cta && !(spec.cluster && spec.cluster_along_n)) {
    out.cluster = 1;
    out.cluster_along_n = false;
  }
  // And a weight gradient the planner put in strips (strips_pay), given keys strips cannot take
  // (clusters), without strips=on: the plain kernel's ring. (epilogue=tma keeps the strips: they
  // take the TMA-store epilogue.)
  const bool asks_plain_ring = spec.cluster && *spec.cluster > 1;
  if (out.strips && asks_plain_ring && !(spec.strips && *spec.strips)) {
    out.strips = false;
    out.stages = ring_stages(out, d, groups);
  }
  // the TMA-store epilogue, for 16-bit outputs: the weight gradient's and the forward's plain
  // epilogue (forward_tma_store_applies); elsewhere the key is ignored
  if (spec.tma_store && out.family == KernelFamily::kWgmma && out.out != DType::kF32 &&
      (out.mode == 2 || forward_tma_store_applies(out))) {
    out.tma_store = *spec.tma_store;
    out.stages = ring_stages(out, d, groups);
  }
  // the TMA-store epilogue's buffers: where it is taken; elsewhere the key is ignored
  if (spec.store_buffers && out.tma_store) {
    out.store_buffers = *spec.store_buffers;
    out.stages = ring_stages(out, d, groups);
  }
  if (!out.tma_store) out.store_buffers = 2;
  if (spec.bn && out.family == KernelFamily::kWgmma) {
    if (out.swiglu && *spec.bn % 128 != 0)
      return invalid_argument("RAGDOT_CUDA_VARIANT: bn " + std::to_string(*spec.bn) +
                              " with the SwiGLU epilogue, whose tile is half gate and half up boxes of 64 columns "
                              "(use 128 or 256)");
    out.bn = *spec.bn;
    out.stages = ring_stages(out, d, groups);
  }
  if (spec.stages && out.family != KernelFamily::kSimt) out.stages = *spec.stages;
  // gathered rows pair only along n (each CTA gathers half of the rows and sends it to the other):
  // cluster=1 and 2n apply there, 2 and 4 leave the variant as it is
  if (spec.cluster && out.family == KernelFamily::kWgmma && out.gather_a) {
    if (*spec.cluster == 1 || spec.cluster_along_n) {
      out.cluster = *spec.cluster;
      out.cluster_along_n = spec.cluster_along_n;
    }
  } else if (spec.cluster && out.family == KernelFamily::kWgmma) {
    const bool along_n = *spec.cluster == 2 && spec.cluster_along_n;
    if (*spec.cluster > 1 && !along_n && out.bn % 128 != 0)
      return invalid_argument("RAGDOT_CUDA_VARIANT: cluster=" + std::to_string(*spec.cluster) +
                              " splits B's tile in halves of 64-column boxes: bn " + std::to_string(out.bn) +
                              " does not split (use 128 or 256, or cluster=2n)");
    out.cluster = *spec.cluster;
    out.cluster_along_n = along_n;
  }
  // split tiles: the Hopper family's mode 1, one CTA per tile; elsewhere the key is ignored
  if (spec.split_tail && out.family == KernelFamily::kWgmma && out.mode == 1) out.split_tail = *spec.split_tail;
  if (out.split_tail && out.cluster > 1)
    return invalid_argument("RAGDOT_CUDA_VARIANT: split=tail runs each tile on one CTA; not with cluster=" +
                            std::to_string(out.cluster) + (out.cluster_along_n ? "n" : ""));
  // the forward's TMA-store epilogue runs each tile on one CTA, whole
  if (out.tma_store && out.mode == 1 && (out.cluster > 1 || out.split_tail))
    return invalid_argument("RAGDOT_CUDA_VARIANT: epilogue=tma in mode 1 stores each tile from one CTA, whole; not "
                            "with cluster or split");
  // swapped operands: the Hopper family's plain mode 1 with 16-bit outputs (not gathered rows nor
  // the SwiGLU or table-row epilogues, whose tiles are row-major); elsewhere the key is ignored
  if (spec.swap_ab && out.family == KernelFamily::kWgmma && out.mode == 1) {
    const bool plain = !out.gather_a && !out.swiglu && !out.scatter_out && out.out != DType::kF32;
    if (*spec.swap_ab && plain && !out.swap_ab) {
      // (clusters and split tiles the swapped tile cannot take: the check after all keys says so)
      if (spec.bn && *spec.bn != 256)
        return invalid_argument("RAGDOT_CUDA_VARIANT: swap=ab tiles are 256 weight columns wide, not bn " +
                                std::to_string(*spec.bn));
      out = swapped(out, d, groups);
      if (spec.stages) out.stages = *spec.stages;
    } else if (!*spec.swap_ab && out.swap_ab) {
      out = unswapped(out, d, groups);
      if (spec.stages) out.stages = *spec.stages;
    }
  }
  // (a swapped variant given other keys: they must leave it a kernel that exists)
  if (out.swap_ab && ((out.cluster > 1 && !swapped_pair(out)) || out.split_tail || out.bn != 256 || out.gather_a ||
                      out.swiglu || out.scatter_out || out.tma_store))
    return invalid_argument("RAGDOT_CUDA_VARIANT: " + out.name() +
                            ": swapped operands (swap=ab) take 256-column tiles, whole, on one CTA or in CTA pairs "
                            "along m (cluster=2; not 2n or 4, nor split), with the plain epilogue");
  if (out.gather_a && out.cluster > 1 && out.stages < 3)
    return invalid_argument("RAGDOT_CUDA_VARIANT: " + out.name() +
                            ": gathered rows in pairs run with three stages or more (cluster=1 for fewer)");
  // weight-gradient strips: the Hopper family's mode 2, one CTA per unit, either epilogue;
  // elsewhere the key is ignored
  if (spec.strips && out.family == KernelFamily::kWgmma && out.mode == 2) {
    if (*spec.strips && !out.strips) {
      // (clusters, which strips cannot take: the check after all keys says so)
      out = in_strips(out, d, groups);
      if (spec.stages) out.stages = *spec.stages;
    } else if (!*spec.strips && out.strips) {
      out.strips = false;
      out.stages = spec.stages ? *spec.stages : ring_stages(out, d, groups);
    }
  }
  // turns of the consumer warpgroups: strips only (pingpong=on with strips=on, or on a weight
  // gradient the planner put in strips); a variant that leaves strips leaves its turns
  if (spec.pingpong && out.family == KernelFamily::kWgmma && out.mode == 2) {
    if (*spec.pingpong && !out.strips)
      return invalid_argument("RAGDOT_CUDA_VARIANT: pingpong=on takes turns in the weight gradient's strips: add "
                              "strips=on");
    out.pingpong = *spec.pingpong;
  }
  if (!out.strips) out.pingpong = false;
  if (out.strips && out.cluster > 1)
    return invalid_argument("RAGDOT_CUDA_VARIANT: " + out.name() +
                            ": strips (strips=on) keep B in one CTA's shared memory; not with cluster");
  if (out.gather_a && out.mode == 2 && (out.cluster > 1 || out.strips || out.tma_store || out.split_tail))
    return invalid_argument("RAGDOT_CUDA_VARIANT: " + out.name() +
                            ": the weight gradient on gathered rows runs one CTA per tile with the register "
                            "epilogue; not with cluster, strips or epilogue=tma");
  // three consumer warpgroups: the plain mode 1 tile on one CTA; elsewhere (mode 2, the swapped
  // tile) the key is ignored
  if (spec.bm && out.family == KernelFamily::kWgmma && out.mode == 1 && !out.swap_ab) {
    if (*spec.bm == 192 && out.warps_m != 3) {
      if (out.bn > 192 && spec.bn)
        return invalid_argument("RAGDOT_CUDA_VARIANT: bm=192 tiles are at most 192 columns wide, not bn " +
                                std::to_string(out.bn));
      out = with_192_rows(out, d, groups);
      if (spec.stages) out.stages = *spec.stages;
    } else if (*spec.bm == 128 && out.warps_m == 3) {
      out.bm = 128;
      out.warps_m = 2;
      out.stages = spec.stages ? *spec.stages : ring_stages(out, d, groups);
    }
  }
  // (whatever keys made it: a 192-row variant must be one the kernel has)
  if (out.family == KernelFamily::kWgmma && out.warps_m == 3 && !three_consumers_apply(out))
    return invalid_argument("RAGDOT_CUDA_VARIANT: " + out.name() +
                            ": bm=192 (three consumer warpgroups) takes the plain mode 1 tile on one CTA, at most 192 "
                            "columns; not with gathered rows, the SwiGLU or table-row epilogues, cluster, split or "
                            "epilogue=tma");
  // overlapped stores: where the variant (after the keys above) has the plain mode 1 epilogue;
  // elsewhere the key is ignored, and a variant that leaves that epilogue leaves them
  if (spec.overlap_store) out.overlap_store = *spec.overlap_store;
  out.overlap_store = out.overlap_store && overlap_store_applies(out);
  // (ring_stages gives 0 where not even two fit: the staging area, B's slots, the table)
  if (out.family == KernelFamily::kWgmma && out.stages < 2)
    return invalid_argument("RAGDOT_CUDA_VARIANT: " + out.name() +
                            " leaves no room in shared memory for two stages of the ring");
  const std::int64_t table = groups < 0 ? kMaxGroupsPlusLocal : groups;
  const std::int64_t static_bytes = out.family == KernelFamily::kWgmma ? kWgmmaStaticSmemBytes : 0;
  if (out.dynamic_smem_bytes(table / 2, table - table / 2) + static_bytes > d.max_dynamic_smem)
    return invalid_argument("RAGDOT_CUDA_VARIANT: " + out.name() + " needs more shared memory than the device has");
  return out;
}

Result<KernelVariant> override_variant(const KernelVariant& v, const std::string& spec, const DeviceTraits& d,
                                       std::int64_t groups) {
  RAGDOT_ASSIGN_OR_RETURN(const VariantSpec parsed, parse_variant_spec(spec));
  return override_variant(v, parsed, d, groups);
}

bool small_groups_on_wgmma(const std::string& spec) {
  const auto parsed = parse_variant_spec(spec);
  return !parsed.ok() || parsed->small_groups_on_wgmma;
}

int tile_order(const KernelVariant& v, const core::GroupGemmProblem& p, std::optional<int> requested) {
  // (the kernels that have it: kMixable in kernels/ragdot/schedule.cuh)
  if (!requested || *requested == RAGDOT_ORDER_PLAIN || v.family != KernelFamily::kWgmma || v.mode != 1 ||
      v.pairs_across_groups() || p.computed_groups < 1)
    return RAGDOT_ORDER_PLAIN;
  const std::int64_t rows = std::int64_t(v.bm) * (v.pairs_along_m() ? 2 : 1);
  const std::int64_t cols = std::int64_t(v.bn) * (v.pairs_along_n() ? 2 : 1);
  const std::int64_t segments = p.computed_groups + 2;
  // the kernel's own bound on its tiles (kernels/ragdot/schedule.cuh), which it checks again
  if (!ragdot_mixed_order_fits(segments, ((p.m + rows - 1) / rows + segments) * ((p.n + cols - 1) / cols)))
    return RAGDOT_ORDER_PLAIN;
  return *requested;
}

std::int64_t raster_bytes(const std::string& spec) {
  const auto parsed = parse_variant_spec(spec);
  return parsed.ok() ? parsed->raster_bytes : 0;
}

std::int64_t compiled_table_for(std::int64_t groups) {
  std::int64_t best = -1;
  for (std::int64_t table : kCompiledTables)
    if (table > 0 && groups <= table && (best < 0 || table < best)) best = table;
  return best;
}

std::vector<KernelVariant> all_variants(const DeviceTraits& d) {
  std::vector<KernelVariant> out;
  const DType floats[] = {DType::kF32, DType::kBF16, DType::kF16};
  if (d.cc_major >= 8) {
    for (DType in : {DType::kBF16, DType::kF16}) {
      for (DType o : floats) {
        for (bool b_k : {true, false})
          for (bool small : {false, true}) out.push_back(mma_variant(1, in, o, true, b_k, small, d));
        out.push_back(mma_variant(2, in, o, false, false, false, d));
        for (bool a_k : {true, false})
          for (bool b_k : {true, false}) out.push_back(mma_variant(3, in, o, a_k, b_k, false, d));
      }
    }
    if (is_hopper(d))
      for (DType in : {DType::kBF16, DType::kF16})
        for (DType o : floats)
          for (int bn : {128, 256}) {
            for (bool b_k : {true, false})
              for (bool gather : {false, true}) {
                const KernelVariant v = wgmma_variant(1, in, o, b_k, bn, d, gather);
                out.push_back(v);
                // gathered rows in CTA pairs along n, as choose_variant picks them
                if (pairs_gathered_rows(v)) out.push_back(in_gathered_pairs(v));
                // and each with overlapped stores (RAGDOT_CUDA_VARIANT=overlap=on)
                if (overlap_store_applies(v)) {
                  KernelVariant o_v = v;
                  o_v.overlap_store = true;
                  out.push_back(o_v);
                  if (pairs_gathered_rows(v)) out.push_back(in_gathered_pairs(o_v));
                }
              }
            out.push_back(wgmma_variant(2, in, o, false, bn, d));
            // the weight gradient on gathered lhs rows (its k), one CTA per tile
            out.push_back(wgmma_variant(2, in, o, false, bn, d, /*gather_a=*/true));
            // the TMA-store epilogue (RAGDOT_CUDA_VARIANT=epilogue=tma): the weight gradient's,
            // and the forward's (outputs of the input type) with both weight layouts and gathered
            // rows, in the stages of each compiled scheduler table (kCompiledTables)
            if (o != DType::kF32) {
              KernelVariant v = wgmma_variant(2, in, o, false, bn, d);
              v.tma_store = true;
              v.stages = ring_stages(v, d, -1);
              out.push_back(v);
              for (int form = 0; form < 3 && o == in; ++form)
                for (std::int64_t groups : kCompiledTables) {
                  KernelVariant f = wgmma_variant(1, in, o, form == 1, bn, d, form == 2);
                  f.tma_store = true;
                  f.stages = ring_stages(f, d, groups);
                  out.push_back(f);
                }
            }
            // the SwiGLU epilogue (PlanOptions::swiglu_epilogue), with and without gathered rows
            if (o != DType::kF32)
              for (bool gather : {false, true}) {
                KernelVariant v = wgmma_variant(1, in, o, false, bn, d, gather);
                v.swiglu = true;
                out.push_back(v);
                if (pairs_gathered_rows(v)) out.push_back(in_gathered_pairs(v));
                if (!gather) {  // and in CTA pairs along m, which split the tile's gate and up boxes
                  v.cluster = 2;
                  out.push_back(v);
                }
              }
            // rows added into a table (PlanOptions::out_scatter_rows): both weight layouts, each
            // with and without gathered rows
            if (o != DType::kF32)
              for (int form = 0; form < 4; ++form) {
                KernelVariant v = wgmma_variant(1, in, o, (form & 1) != 0, bn, d, (form & 2) != 0);
                v.scatter_out = true;
                out.push_back(v);
              }
            // CTA clusters sharing B, A or both (RAGDOT_CUDA_VARIANT=cluster=2, 2n or 4)
            for (int kind = 0; kind < 3; ++kind)
              for (KernelVariant v : {wgmma_variant(1, in, o, true, bn, d), wgmma_variant(1, in, o, false, bn, d),
                                      wgmma_variant(2, in, o, false, bn, d)}) {
                v.cluster = kind == 2 ? 4 : 2;
                v.cluster_along_n = kind == 1;
                out.push_back(v);
              }
          }
    if (is_hopper(d)) {
      // combinations the override accepts (bf16 stands for both 16-bit types): CTA clusters with
      // the TMA-store epilogue, and pairs along n at the tile widths the list above leaves out
      for (int kind = 0; kind < 3; ++kind)
        for (int bn : {128, 256}) {
          KernelVariant v = wgmma_variant(2, DType::kBF16, DType::kBF16, false, bn, d);
          v.tma_store = true;
          v.stages = ring_stages(v, d, -1);
          v.cluster = kind == 2 ? 4 : 2;
          v.cluster_along_n = kind == 1;
          out.push_back(v);
        }
      for (int bn : {64, 192}) {
        KernelVariant v = wgmma_variant(1, DType::kBF16, DType::kBF16, false, bn, d);
        v.cluster = 2;
        v.cluster_along_n = true;
        out.push_back(v);
        v.cluster = 1;  // and the scatter epilogue at these widths
        v.cluster_along_n = false;
        v.scatter_out = true;
        out.push_back(v);
      }
      // overlapped stores in CTA pairs along n (RAGDOT_CUDA_VARIANT=overlap=on,cluster=2n)
      for (int bn : {128, 256}) {
        KernelVariant v = wgmma_variant(1, DType::kBF16, DType::kBF16, false, bn, d);
        v.overlap_store = true;
        v.cluster = 2;
        v.cluster_along_n = true;
        out.push_back(v);
      }
      // the SwiGLU and scatter epilogues in CTA clusters (SwiGLU in pairs along m is listed above)
      for (int kind = 0; kind < 3; ++kind)
        for (bool swiglu : {false, true}) {
          if (swiglu && kind == 0) continue;
          KernelVariant v = wgmma_variant(1, DType::kBF16, DType::kBF16, false, 256, d);
          (swiglu ? v.swiglu : v.scatter_out) = true;
          v.cluster = kind == 2 ? 4 : 2;
          v.cluster_along_n = kind == 1;
          out.push_back(v);
        }
    }
    if (is_hopper(d)) {
      // the 192-row tile (RAGDOT_CUDA_VARIANT=bm=192): both 16-bit types, every output type, both
      // weight layouts at 192 columns; bf16 at the narrower widths bn may ask for
      for (DType in : {DType::kBF16, DType::kF16})
        for (DType o : floats)
          for (bool b_k : {false, true}) out.push_back(with_192_rows(wgmma_variant(1, in, o, b_k, 256, d), d));
      for (int bn : {64, 128}) out.push_back(with_192_rows(wgmma_variant(1, DType::kBF16, DType::kBF16, false, bn, d), d));
    }
    if (is_hopper(d)) {
      // the last wave split along k (RAGDOT_CUDA_VARIANT=split=tail), in every mode 1 form: both
      // weight layouts, gathered rows, the SwiGLU and table-row epilogues, f32 outputs, f16 inputs
      // with both weight layouts (the partial sums are the same code for every dtype; an f16 op
      // the planner swaps, given split=tail, takes its plain tile); and at the narrower tile
      for (int form = 0; form < 8; ++form) {
        const DType in = form >= 6 ? DType::kF16 : DType::kBF16, o = form == 5 ? DType::kF32 : in;
        KernelVariant v = wgmma_variant(1, in, o, form == 1 || form == 7, 256, d, form == 2);
        v.swiglu = form == 3;
        v.scatter_out = form == 4;
        v.split_tail = true;
        out.push_back(v);
      }
      KernelVariant narrow = wgmma_variant(1, DType::kBF16, DType::kBF16, false, 128, d);
      narrow.split_tail = true;
      out.push_back(narrow);
      // swapped operands (RAGDOT_CUDA_VARIANT=swap=ab), on one CTA and in CTA pairs along m
      // (swap=ab,cluster=2): both 16-bit types, both weight layouts, in the stages of each compiled
      // scheduler table (kCompiledTables)
      for (int cluster : {1, 2})
        for (DType t : {DType::kBF16, DType::kF16})
          for (bool b_k : {false, true})
            for (std::int64_t groups : kCompiledTables) {
              KernelVariant v = swapped(wgmma_variant(1, t, t, b_k, 256, d), d, groups);
              v.cluster = cluster;
              out.push_back(v);
            }
    }
    if (is_hopper(d)) {
      // weight-gradient strips (RAGDOT_CUDA_VARIANT=strips=on): 16-bit and f32 outputs, every tile
      // width (its own count of B's slots), in the ring of the largest scheduler table and, for
      // the common form, of each smaller compiled one (kCompiledTables)
      for (std::int64_t groups : kCompiledTables) {
        out.push_back(in_strips(wgmma_variant(2, DType::kBF16, DType::kBF16, false, 256, d), d, groups));
        if (groups < 0) {
          out.push_back(in_strips(wgmma_variant(2, DType::kF16, DType::kF32, false, 256, d), d, groups));
          out.push_back(in_strips(wgmma_variant(2, DType::kBF16, DType::kF32, false, 128, d), d, groups));
          for (int bn : {64, 192}) out.push_back(in_strips(wgmma_variant(2, DType::kBF16, DType::kBF16, false, bn, d), d));
        }
      }
      // and with turns (RAGDOT_CUDA_VARIANT=strips=on,pingpong=on), at bn 256: bf16 to bf16 and
      // f32 in each compiled scheduler table's ring, f16 to f16 and f32 beside the largest table
      for (std::int64_t groups : kCompiledTables)
        for (DType in : {DType::kBF16, DType::kF16})
          for (DType o : {in, DType::kF32}) {
            if (in == DType::kF16 && groups >= 0) continue;
            KernelVariant v = in_strips(wgmma_variant(2, in, o, false, 256, d), d, groups);
            v.pingpong = true;
            out.push_back(v);
          }
      // and with the TMA-store epilogue (strips=on,epilogue=tma; 16-bit outputs): bf16 at bn 256
      // in each compiled table's ring, in step and in turns; f16 in both, and bf16 at the other
      // tile widths, beside the largest table
      struct StripStoreForm {
        DType type;
        int bn;
        bool turns, every_table;
      };
      const StripStoreForm forms[] = {{DType::kBF16, 256, false, true}, {DType::kBF16, 256, true, true},
                                      {DType::kF16, 256, false, false}, {DType::kF16, 256, true, false},
                                      {DType::kBF16, 64, false, false}, {DType::kBF16, 128, false, false},
                                      {DType::kBF16, 192, false, false}};
      for (std::int64_t groups : kCompiledTables)
        for (const StripStoreForm& f : forms) {
          if (groups >= 0 && !f.every_table) continue;
          KernelVariant v = wgmma_variant(2, f.type, f.type, false, f.bn, d);
          v.tma_store = true;
          v = in_strips(v, d, groups);
          v.pingpong = f.turns;
          out.push_back(v);
        }
    }
    out.erase(std::remove_if(out.begin(), out.end(), [](const KernelVariant& v) { return v.stages < 2; }), out.end());
    // (a table-dependent stage count may come out the same for two tables: list it once)
    std::vector<KernelVariant> unique;
    for (const KernelVariant& v : out)
      if (std::find(unique.begin(), unique.end(), v) == unique.end()) unique.push_back(v);
    out = std::move(unique);
  }
  for (int mode = 1; mode <= 3; ++mode)
    for (DType l : floats)
      for (DType r : floats)
        for (DType o : floats) out.push_back(simt_variant(mode, l, r, o));
  return out;
}

}  // namespace ragdot::cuda
