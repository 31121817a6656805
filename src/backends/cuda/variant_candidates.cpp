#include "backends/cuda/variant_candidates.hpp"

#include <algorithm>

namespace ragdot::cuda {

namespace {

// Rows per group up to which swapped operands (tiles of up to 160 token rows) are worth timing:
// past two of their tiles a group's rows fill plain 128-row tiles nearly as well.
constexpr std::int64_t kSwapRowsPerGroup = 320;
// Fewer rows per group than this: decode-sized groups, where the mma.sync family's 64-row tile
// may waste fewer rows than the wgmma family's 128 (choose_variant's small_m).
constexpr std::int64_t kDecodeRowsPerGroup = 96;

}  // namespace

std::vector<Candidate> candidate_variants(const core::GroupGemmProblem& p, const DeviceTraits& d,
                                          const KernelVariant& chosen) {
  std::vector<Candidate> out{{chosen, ""}};
  if (chosen.family != KernelFamily::kWgmma) return out;  // other families have no alternates yet
  const std::int64_t groups = std::max<std::int64_t>(p.computed_groups, 1);
  // Stage counts that depend on the scheduler table: those of the smallest table all_variants
  // compiles that holds this problem's (they fit any smaller table too).
  const std::int64_t table = compiled_table_for(p.num_groups + p.computed_groups);
  std::vector<std::string> specs;
  // (a gathered pair's narrower tile on one CTA: CI compiles pairs at bn 256 only)
  // (and strips' narrower tile in one CTA per tile: CI compiles strips at bn 256 only)
  if (p.n > 128)
    specs.push_back(chosen.bn != 256                        ? "bn=256"
                    : chosen.gather_a && chosen.cluster > 1 ? "bn=128,cluster=1"
                    : chosen.strips                         ? "bn=128,strips=off"
                                                            : "bn=128");
  if (chosen.mode == 1) {
    const bool plain = !chosen.gather_a && !chosen.swiglu && !chosen.scatter_out && chosen.out != DType::kF32;
    // (the planner swaps some ops itself: then the plain tile is the alternative)
    if (chosen.swap_ab) specs.push_back("swap=off");
    else if (plain && p.m / groups <= kSwapRowsPerGroup) specs.push_back("swap=ab");
    specs.push_back("split=tail");
    // the other of two and three consumer warpgroups (the 192 x 192 tile), for groups that fill a
    // 192-row tile at least: smaller ones' tiles multiply mostly rows past their group's end
    if (!chosen.gather_a && !chosen.swiglu && !chosen.scatter_out && !chosen.swap_ab && p.m / groups >= 192)
      specs.push_back(chosen.warps_m == 3 ? "bm=128" : "bm=192");
    // gathered rows: the other of one CTA per tile and CTA pairs along n
    if (chosen.gather_a) specs.push_back(chosen.cluster > 1 ? "cluster=1" : "cluster=2n");
    // (not the TMA-store epilogue: on an H200 it lost to the register stores on every benchmark
    // case, by 2 to 17%, bench/RESULTS.md 2026-12-06)
  } else if (chosen.mode == 2) {
    specs.push_back(chosen.strips ? "strips=off" : "strips=on");
    if (chosen.out != DType::kF32) specs.push_back("epilogue=tma");
  }
  const std::vector<KernelVariant> compiled = all_variants(d);
  auto add = [&](const KernelVariant& v, const std::string& spec) {
    if (std::find(compiled.begin(), compiled.end(), v) == compiled.end()) return;
    if (std::any_of(out.begin(), out.end(), [&](const Candidate& c) { return c.variant == v; })) return;
    out.push_back({v, spec});
  };
  for (const std::string& spec : specs) {
    const auto v = override_variant(chosen, spec, d, table);
    if (v.ok()) add(*v, spec);
  }
  if (chosen.mode == 1 && p.m / groups < kDecodeRowsPerGroup) {
    const auto v = choose_variant(p, d, /*wgmma_small_groups=*/false);
    if (v.ok()) add(*v, "small_groups=mma");
  }
  return out;
}

}  // namespace ragdot::cuda
