// tile_model: a host model of how the Hopper family's tiles keep the SMs busy on the benchmark's
// mode 1 cases (the group sizes gpu_bench uses). It needs no GPU: it is the arithmetic behind a
// kernel choice, to be checked against the GPU's timings, not a timing.
//
//   tile_model [--sms N] [--piece-overhead STEPS]
//
// Per case: the 128 x bn tiles and the waves they make on N SMs (default 132, an H200); the rows
// the tensor cores multiply against the useful ones (a warpgroup's 64 rows are the unit: a
// group's last rows fill part of one); the in-order hand-out's efficiency (every SM takes the next
// tile when it is free; a tile costs its k steps, half of that with 64 rows or fewer), against
// the same work spread evenly; and the modelled speedup of RAGDOT_CUDA_VARIANT=split=tail
// (kernels/ragdot/split.h: the last wave's tiles cut along k, each piece charged STEPS k steps,
// default 2, for its partial sums' round trip through L2). Last, the same for swapped operands
// (RAGDOT_CUDA_VARIANT=swap=ab: tiles of up to 160 token rows by 256 columns, the rows as wgmma's N
// in steps of 16, A loaded in boxes of 32 rows): the rows multiplied, and the bytes the tiles load
// from L2 against the plain tiles' (A's loaded rows plus B's columns, times k).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <queue>
#include <string>
#include <vector>

#include "bench_cases.hpp"
#include "ragdot/split.h"
#include "ragdot/workloads.hpp"

namespace {

// The time the last SM finishes when `sms` SMs take `costs` in order, each when it is free.
double in_order_makespan(const std::vector<double>& costs, int sms) {
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  for (int i = 0; i < sms; ++i) free_at.push(0.0);
  double end = 0;
  for (double c : costs) {
    const double t = free_at.top() + c;
    free_at.pop();
    free_at.push(t);
    end = std::max(end, t);
  }
  return end;
}

}  // namespace

int main(int argc, char** argv) {
  int sms = 132;
  double piece_overhead = 2.0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sms" && i + 1 < argc) sms = std::atoi(argv[++i]);
    else if (a == "--piece-overhead" && i + 1 < argc) piece_overhead = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "usage: tile_model [--sms N] [--piece-overhead STEPS]\n");
      return 2;
    }
  }
  if (sms < 1) {
    std::fprintf(stderr, "tile_model: --sms must be 1 or more\n");
    return 2;
  }
  std::printf("| case | skew | tiles | waves on %d SMs | rows useful / multiplied | in-order hand-out efficiency | "
              "split=tail pieces | modelled split=tail speedup | swap=ab: rows useful / multiplied | swap=ab: L2 bytes / "
              "plain |\n|---|---|---|---|---|---|---|---|---|---|\n",
              sms);
  for (const ragdot::bench::BenchCase& c : ragdot::bench::bench_cases()) {
    if (c.mode != 1 || c.name.find("decode") != std::string::npos) continue;  // the prefill forward cases
    const auto preset = ragdot::workloads::find_preset(c.preset);
    if (!preset.ok()) {
      std::fprintf(stderr, "tile_model: %s\n", preset.status().message().c_str());
      return 1;
    }
    const auto gemms = ragdot::workloads::layer_gemms(*preset, c.tokens);
    const auto& g = c.gemm == "up" ? gemms[0] : gemms[1];
    const auto sizes = ragdot::workloads::route_group_sizes(c.tokens, preset->top_k, g.groups, c.skew,
                                                                 ragdot::bench::kRouterSeed);
    const std::int64_t bn = g.n >= 256 ? 256 : 128, n_tiles = (g.n + bn - 1) / bn, k_steps = (g.k + 63) / 64;
    std::vector<double> costs;  // in k steps of a full tile, in the scheduler's order
    double useful = 0, multiplied = 0;
    double plain_loads = 0, swap_loads = 0, swap_multiplied = 0;  // rows or columns loaded, rows multiplied
    const std::int64_t swap_n_tiles = (g.n + 255) / 256;
    for (std::int64_t rows : sizes) {
      const std::int64_t m_tiles = (rows + 127) / 128;
      for (std::int64_t n = 0; n < n_tiles; ++n) {
        for (std::int64_t m = 0; m < m_tiles; ++m) {
          const std::int64_t here = std::min<std::int64_t>(128, rows - m * 128);
          const double share = here > 64 ? 1.0 : 0.5;
          costs.push_back(double(k_steps) * share);
          useful += double(k_steps) * double(here) / 128.0;
          multiplied += double(k_steps) * share;
          plain_loads += double(here > 64 ? 128 : 64) + double(bn);  // A in boxes of 64 rows, B whole
        }
      }
      for (std::int64_t m = 0; m < (rows + 159) / 160; ++m) {
        const std::int64_t here = std::min<std::int64_t>(160, rows - m * 160);
        swap_multiplied += double((here + 15) / 16 * 16) * double(swap_n_tiles);
        swap_loads += double(((here + 31) / 32 * 32) + 256) * double(swap_n_tiles);
      }
    }
    double row_total = 0;
    for (std::int64_t rows : sizes) row_total += double(rows);
    const double whole = in_order_makespan(costs, sms);
    const RagdotSplit split = ragdot_split_plan(int(costs.size()), int(costs.size()), sms, int(k_steps),
                                                RAGDOT_SPLIT_MAX_PIECES);
    std::vector<double> units;
    for (int u = 0; u < split.total; ++u) {
      int tile = 0, piece = 0, slot = 0;
      ragdot_split_unit(&split, u, &tile, &piece, &slot);
      const double c_tile = costs[std::size_t(tile)];
      units.push_back(slot < 0 ? c_tile : c_tile / split.pieces + piece_overhead);
    }
    const double with_split = in_order_makespan(units, sms);
    std::printf("| %s | %.1f | %zu | %.2f | %.3f | %.3f | %d | %.3f | %.3f | %.3f |\n", c.name.c_str(), c.skew, costs.size(),
                double(costs.size()) / sms, useful / multiplied, multiplied / sms / whole, split.pieces,
                whole / with_split, row_total * double(swap_n_tiles) / swap_multiplied, swap_loads / plain_loads);
  }
  return 0;
}
