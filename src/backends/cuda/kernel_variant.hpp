// A kernel variant: everything that is a compile-time constant of one generated kernel. The
// planner picks one per op and device (choose_variant); generate_source writes its CUDA source.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/problem.hpp"
#include "ragdot/status.hpp"

namespace ragdot::cuda {

enum class KernelFamily : std::uint8_t {
  kMmaSync,  // tensor cores through mma.sync + cp.async + ldmatrix; sm_80 and up; 16-bit inputs
  kSimt,     // CUDA-core FMA; any dtypes and strides (f32 inputs keep exact f32 products)
  kWgmma,    // Hopper (sm_90a): TMA + mbarrier ring, producer warp, two (or three) wgmma consumer warpgroups
};

struct KernelVariant {
  KernelFamily family = KernelFamily::kSimt;
  int mode = 1;  // 1, 2, 3 as RaggedMode
  DType lhs = DType::kBF16, rhs = DType::kBF16, out = DType::kBF16;
  bool a_k_major = true;  // lhs contiguous along k
  bool b_k_major = false; // rhs contiguous along k ([E, N, K] weights)
  int bm = 128, bn = 128, bk = 64;
  int warps_m = 2, warps_n = 4;  // mma family; wgmma: warps_m consumer warpgroups (3 with bm 192)
  int stages = 4;                // mma and wgmma families
  int tm = 4, tn = 4;            // simt family: outputs per thread
  bool gather_a = false;         // wgmma: A rows (mode 1: m; mode 2: k) read through an index (cp.async), not TMA
  int cluster = 1;               // wgmma: CTAs sharing operands through TMA multicast: 2 = a pair
  bool cluster_along_n = false;  //   along m (B shared) or, with this, along n (A shared); 4 = 2 x 2
  bool tma_store = false;        // wgmma mode 2, 16-bit out: epilogue through shared memory and TMA stores
  int store_buffers = 2;         //   its box buffers per consumer warpgroup (2 to 4: boxes in flight)
  bool swiglu = false;           // wgmma mode 1: out = silu(gate) * up of the product's halves
  bool scatter_out = false;      // wgmma mode 1: rows added (scaled) into an f32 table through an index
  bool split_tail = false;       // wgmma mode 1, one CTA per tile: the last wave's tiles split along k (split.h)
  bool swap_ab = false;          // wgmma mode 1: out^T = W^T x^T, a tile's token rows as wgmma's N (bm 160)
  bool strips = false;           // wgmma mode 2: runs of a column's tiles on one CTA, B kept in shared memory
                                 //   (strips.h); `stages` then counts the ring of A tiles
  bool pingpong = false;         // wgmma strips: the consumer warpgroups take turns on the tensor cores
  bool overlap_store = false;    // wgmma mode 1, plain epilogue, 16-bit out: a tile's stores run during the
                                 //   next tile's k loop (kernels/ragdot/wgmma.cuh, kOverlapStore)

  int threads() const;
  bool pairs_along_m() const { return cluster == 4 || (cluster == 2 && !cluster_along_n); }  // B shared
  bool pairs_along_n() const { return cluster == 4 || (cluster == 2 && cluster_along_n); }   // A shared
  // Mode 1's m pairs cut their tiles from all the groups' m tiles in order, a pair across two
  // groups sharing nothing (kernels/ragdot/schedule.cuh, kPairRows); plain tile order only.
  bool pairs_across_groups() const {
    return family == KernelFamily::kWgmma && mode == 1 && cluster == 2 && !cluster_along_n && !strips;
  }
  // Static shared memory is part of the kernel; this is the dynamic part for G groups, L local.
  std::int64_t dynamic_smem_bytes(std::int64_t groups, std::int64_t local_groups) const;
  std::string name() const;  // one line, stable: used in plans and logs
  bool operator==(const KernelVariant&) const = default;
};

// The CUDA source of the variant's kernel (entry point "ragdot_group_gemm").
std::string generate_source(const KernelVariant& v);
constexpr const char* kKernelEntry = "ragdot_group_gemm";
constexpr const char* kCheckEntry = "ragdot_check_group_sizes";

// The most static shared memory a Hopper (wgmma) kernel declares: its tile ring, barriers and scan
// scratch (ptxas reports 1024 bytes; test_cuda_codegen checks every variant against this bound).
// The device's per-block limit counts it with the dynamic part, so stage counts leave room for it.
constexpr std::int64_t kWgmmaStaticSmemBytes = 1024;

struct DeviceTraits {
  int cc_major = 9, cc_minor = 0;
  std::int64_t max_dynamic_smem = 227 * 1024;  // opt-in per-block limit
  int sm_count = 132;                           // multiprocessors (an H100 SXM's or H200's)
};

// Picks the variant for a canonical problem on a device, or says why the cuda backend does not
// take it (the caller then falls through to the next backend). wgmma_small_groups: mode 1 with
// fewer than ~96 rows per group (decode) on the Hopper family too (the default); false: mma.sync.
Result<KernelVariant> choose_variant(const core::GroupGemmProblem& p, const DeviceTraits& device,
                                     bool wgmma_small_groups = true);

// A tuning override ("bn=128,stages=6"; RAGDOT_CUDA_VARIANT), parsed once: `bn` (wgmma family:
// 64, 128, 192 or 256; the stage count is refitted), `stages` (mma and wgmma families: 2 to 8, as
// far as shared memory allows; applied after bn), `cluster` (wgmma family: 1; 2 for CTA pairs
// along m sharing B, which needs bn 128 or 256; 2n along n sharing A; 4 for 2 x 2 clusters sharing
// both; gathered rows take 1 or 2n only, 2n being the planner's choice where n has an even number of column tiles), `epilogue` (tma: the wgmma weight gradient with 16-bit outputs
// stores through shared memory and TMA; direct: from registers), `small_groups` (mma or wgmma,
// the default: the family of decode-sized groups, for choose_variant) and `raster` (KiB of L2 for
// a block of a group's rows, kernels/ragdot/raster.h; 0, the default, is the plain order; for the
// plan's launch arguments), `split` (tail: the wgmma family's mode 1 splits the last wave's tiles
// along k, kernels/ragdot/split.h, with a workspace of f32 partial sums; off, the default: whole
// tiles; not with clusters), `swap` (ab: the wgmma family's mode 1 computes out^T = W^T x^T, 256
// weight columns by up to 160 token rows per tile, the rows as wgmma's N in steps of 16, so that
// a group of up to 160 rows reads its weights once and multiplies few rows for nothing; plain
// mode 1 with 16-bit outputs only; off, the default), `strips` (on: the wgmma family's mode 2 runs
// a group's tiles of one column tile in a row on one CTA, which loads the group's B once for them
// where its k steps fit in shared memory, kernels/ragdot/strips.h; not with clusters or the
// TMA-store epilogue; off, the default), `overlap` (on: the wgmma family's plain mode 1 epilogue
// with 16-bit outputs stores a tile during the next tile's k loop, where the producer's registers
// allow it: [G, K, N] weights, one CTA or pairs along n; off, the default), `order` (plain, auto or
// mix: how the wgmma family's mode 1 hands out groups, tile_order below; for the plan's launch
// arguments), `ctas` (the persistent families' grid at most that many CTAs, a
// multiple of the cluster size: for a GPU shared with other work, and for tests of how tiles
// spread over few CTAs; for the plan's launch), `bm` (192: the wgmma family's plain mode 1 tile
// on three consumer warpgroups, 192 rows by at most 192 columns, bn 192 unless bn says less; one
// CTA per tile, so not with cluster, split or epilogue=tma; 128, the default, two warpgroups). An unknown key or a value out of range is an error that names it, so
// a typo never silently measures the default.
struct VariantSpec {
  std::optional<int> bn, bm, stages, cluster;
  bool cluster_along_n = false;  // with cluster 2
  std::optional<bool> tma_store;
  std::optional<int> store_buffers;
  std::optional<bool> split_tail;
  std::optional<bool> swap_ab;
  std::optional<bool> strips;
  std::optional<bool> pingpong;
  std::optional<bool> overlap_store;
  std::optional<int> tile_order;  // RAGDOT_ORDER_PLAIN, _AUTO or _MIX (kernels/ragdot/tile_order.h)
  std::optional<int> ctas;  // the persistent grid's CTAs at most (for the plan's launch)
  bool small_groups_on_wgmma = true;
  std::int64_t raster_bytes = 0;
};
Result<VariantSpec> parse_variant_spec(const std::string& spec);

// Applies an override to a chosen variant. A key the variant's family does not have (or, for
// epilogue, a variant it does not apply to) is ignored, so one setting can stand for a program
// whose ops land on different families; a combination the variant cannot take is an error.
// `groups`: the op's groups plus its computed groups, whose scheduler table shares the shared
// memory (the swapped-operand tile takes a fourth stage where a small table leaves room; other
// variants, and the check that the result fits, assume the largest table unless told).
Result<KernelVariant> override_variant(const KernelVariant& v, const VariantSpec& spec, const DeviceTraits& device,
                                       std::int64_t groups = -1);
Result<KernelVariant> override_variant(const KernelVariant& v, const std::string& spec, const DeviceTraits& device,
                                       std::int64_t groups = -1);
// How a plan of variant `v` hands out mode 1's tiles (kernels/ragdot/tile_order.h): RAGDOT_ORDER_MIX,
// groups ranked by rows and the largest groups' tiles and the smallest groups' taken in turn, so
// that compute-bound and memory-bound tiles run side by side however the busy experts are
// numbered; RAGDOT_ORDER_AUTO, the mixed order for a launch whose largest group has at least
// RAGDOT_ORDER_MIN_SKEW times the mean rows and the plain order for a balanced one; or
// RAGDOT_ORDER_PLAIN, groups in index order. `requested`: the override's `order`, else PLAIN: on
// an H100 the mixed order did not pay where a model of waves said it would (skewed deepseek-v3
// and qwen3 lost 0-10%, bench/RESULTS.md 2026-12-06), so it is opt-in. Only the wgmma family's
// mode 1 has it, and only where its packed table fits (up to RAGDOT_ORDER_MAX_GROUPS groups);
// elsewhere PLAIN.
int tile_order(const KernelVariant& v, const core::GroupGemmProblem& p, std::optional<int> requested);
// The spec's small_groups and raster settings (their defaults if it does not parse).
bool small_groups_on_wgmma(const std::string& spec);
std::int64_t raster_bytes(const std::string& spec);

// Every variant choose_variant can return for a device (CI compiles them all), and every
// candidate a measured plan times (variant_candidates.hpp).
std::vector<KernelVariant> all_variants(const DeviceTraits& device);

// Scheduler tables (groups plus computed groups) whose stage counts all_variants compiles for
// the variants whose ring depth depends on the table (swapped operands, strips): the largest (-1)
// and two smaller ones, where a small table leaves room for another stage. compiled_table_for
// gives the smallest of them that holds `groups` (-1 past the largest finite one).
inline constexpr std::int64_t kCompiledTables[] = {-1, 512, 64};
std::int64_t compiled_table_for(std::int64_t groups);

// The NVRTC architecture for a device: "sm_90a" on Hopper (wgmma needs the a-suffix), else "sm_XY".
std::string arch_for(const DeviceTraits& device);

}  // namespace ragdot::cuda
