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
// from L2 against the plain tiles' (A's loaded rows plus B's columns, times k), and both in GB
// (16-bit operands): on a kernel bound by what L2 sends to the SMs (deepseek-v3's, ncu: 97% of L2
// throughput) those bytes, not the FLOPs, set the time, so a skewed router's against a uniform
// one's is the ratio to expect between the two cases' times. The last column is a kernel not
// built: swapped tiles whose group has two or more of them taken in pairs that share each weight
// tile (a TMA multicast into both CTAs, as cluster=2 does for plain tiles), so that a hot expert's
// weights leave L2 once per pair of tiles instead of once per tile. The column after it is another
// kernel not built: swapped tiles taken in pairs along n (two adjacent 256-column tiles of the same
// rows) that share each box of token rows, as cluster=2n does for plain tiles, so that a group's
// rows leave L2 once per two column tiles (deepseek-v3's down projection reads its ~128 rows for
// each of 28 column tiles).
//
// A second table puts the same cases' tiles in the plain order and in the mixed order
// (RAGDOT_CUDA_VARIANT=order=mix, kernels/ragdot/tile_order.h: groups ranked by rows, tiles taken
// from both ends of that list in turn) through a model of both the tensor cores and DRAM: the
// tiles go out in waves of one per SM, and a wave lasts as long as its slowest tile (k steps at
// `--tflops` shared by the SMs; half for 64 rows or fewer) or as long as DRAM takes to read its
// bytes at `--dram-tbs` (a group's weight tile with its first m tile, its rows with its first n
// tile, both once), whichever is longer.
//
// A third table is for a kernel not built: 192 x 192 tiles with three consumer warpgroups of 64
// rows (the shape of cuBLAS's kernel for mixtral's dense roof, nvjet ..._192x192_64x3_2x1, which
// ncu found reading 13.3 GB out of L2 where ragdot's 128 x 256 tiles read 23.4; bench/RESULTS.md,
// 2026-12-07 04:13 UTC). Per case: the bytes they load from L2 alone and in m pairs sharing each
// weight tile (a TMA multicast, as cluster=2 does), against the 128 x 256 tiles' alone and in
// cluster=2's pairs (which read as few bytes, and did not pay on the H200), and how evenly
// the in-order hand-out spreads them (a warpgroup without rows idles, as now: a tile costs its k
// steps times its busy warpgroups over three). A warpgroup's 64 rows stay the unit of rows
// multiplied, so those are the 128 x 256 tiles'.
//
// A fourth table takes the weight-gradient cases (mode 2): the bytes the tiles move through L2
// (operands loaded plus outputs stored) with RAGDOT_CUDA_VARIANT=strips=on (kernels/ragdot/strips.h:
// a strip's B loaded once while the group's k steps fit in B's slots) against the plain tiles,
// and the strips' units and how evenly the in-order hand-out spreads them (a tile costs its k
// steps plus `--epilogue-steps`, default 2, for its output).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <queue>
#include <string>
#include <vector>

#include "bench_cases.hpp"
#include "ragdot/split.h"
#include "ragdot/strips.h"
#include "ragdot/tile_order.h"
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

// One tile in the wave model: its time on the tensor cores (s) and the DRAM bytes it brings in.
struct WaveTile {
  double seconds, bytes;
};
double wave_model_seconds(const std::vector<WaveTile>& tiles, int sms, double dram_bytes_per_s) {
  double total = 0;
  for (std::size_t i = 0; i < tiles.size(); i += std::size_t(sms)) {
    double slowest = 0, bytes = 0;
    for (std::size_t j = i; j < std::min(tiles.size(), i + std::size_t(sms)); ++j) {
      slowest = std::max(slowest, tiles[j].seconds);
      bytes += tiles[j].bytes;
    }
    total += std::max(slowest, bytes / dram_bytes_per_s);
  }
  return total;
}

// The share of the SMs' time the in-order hand-out of `costs` keeps busy.
double in_order_efficiency(const std::vector<double>& costs, int sms) {
  return std::accumulate(costs.begin(), costs.end(), 0.0) / sms / in_order_makespan(costs, sms);
}

// The case's GEMM and its router's group sizes, as gpu_bench makes them; false (said on stderr)
// for an unknown preset.
bool case_gemm(const ragdot::bench::BenchCase& c, ragdot::workloads::LayerGemm* g, std::vector<std::int64_t>* sizes) {
  const auto preset = ragdot::workloads::find_preset(c.preset);
  if (!preset.ok()) {
    std::fprintf(stderr, "tile_model: %s\n", preset.status().message().c_str());
    return false;
  }
  const auto gemms = ragdot::workloads::layer_gemms(*preset, c.tokens);
  *g = c.gemm == "up" ? gemms[0] : gemms[1];
  *sizes = ragdot::workloads::route_group_sizes(c.tokens, preset->top_k, g->groups, c.skew, ragdot::bench::kRouterSeed);
  return true;
}

// A benchmark case with its GEMM and group sizes.
struct ModelCase {
  ragdot::bench::BenchCase c;
  ragdot::workloads::LayerGemm g;
  std::vector<std::int64_t> sizes;
};
// The benchmark's cases of one mode (mode 1: the prefill ones, not decode), in its order; false
// (said on stderr) for an unknown preset.
bool model_cases(int mode, std::vector<ModelCase>* out) {
  for (const ragdot::bench::BenchCase& c : ragdot::bench::bench_cases()) {
    if (c.mode != mode || (mode == 1 && c.name.find("decode") != std::string::npos)) continue;
    ModelCase mc{c, {}, {}};
    if (!case_gemm(c, &mc.g, &mc.sizes)) return false;
    out->push_back(std::move(mc));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int sms = 132;
  double piece_overhead = 2.0, epilogue_steps = 2.0, tflops = 800.0, dram_tbs = 4.0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sms" && i + 1 < argc) sms = std::atoi(argv[++i]);
    else if (a == "--piece-overhead" && i + 1 < argc) piece_overhead = std::atof(argv[++i]);
    else if (a == "--epilogue-steps" && i + 1 < argc) epilogue_steps = std::atof(argv[++i]);
    else if (a == "--tflops" && i + 1 < argc) tflops = std::atof(argv[++i]);
    else if (a == "--dram-tbs" && i + 1 < argc) dram_tbs = std::atof(argv[++i]);
    else {
      std::fprintf(stderr, "usage: tile_model [--sms N] [--piece-overhead STEPS] [--epilogue-steps STEPS] [--tflops T] "
                           "[--dram-tbs B]\n");
      return 2;
    }
  }
  if (sms < 1 || tflops <= 0 || dram_tbs <= 0) {
    std::fprintf(stderr, "tile_model: --sms, --tflops and --dram-tbs must be positive\n");
    return 2;
  }
  std::vector<ModelCase> prefill, weight_gradients;
  if (!model_cases(1, &prefill) || !model_cases(2, &weight_gradients)) return 1;
  std::printf("| case | skew | tiles | waves on %d SMs | rows useful / multiplied | in-order hand-out efficiency | "
              "split=tail pieces | modelled split=tail speedup | swap=ab: rows useful / multiplied | swap=ab: L2 bytes / "
              "plain | L2 to SMs, plain (GB) | L2 to SMs, swap=ab (GB) | L2 to SMs, swap=ab with weights shared by pairs (GB) "
              "| L2 to SMs, swap=ab with rows shared by n pairs (GB) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
              sms);
  for (const auto& [c, g, sizes] : prefill) {
    const std::int64_t bn = g.n >= 256 ? 256 : 128, n_tiles = (g.n + bn - 1) / bn, k_steps = (g.k + 63) / 64;
    std::vector<double> costs;  // in k steps of a full tile, in the scheduler's order
    double useful = 0, multiplied = 0;
    double plain_loads = 0, swap_loads = 0, swap_multiplied = 0;  // rows or columns loaded, rows multiplied
    double paired_swap_loads = 0, n_paired_swap_loads = 0;
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
        // (in pairs: the pair's second tile loads its rows only)
        paired_swap_loads += double(((here + 31) / 32 * 32) + (m % 2 == 0 ? 256 : 0)) * double(swap_n_tiles);
        // (in n pairs: each pair of column tiles loads the rows once; an odd last tile alone)
        n_paired_swap_loads += double((here + 31) / 32 * 32) * double((swap_n_tiles + 1) / 2) + 256.0 * double(swap_n_tiles);
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
    const double gb_per_load = double(g.k) * 2.0 / 1e9;  // one row or column of 16-bit values, k long
    std::printf("| %s | %.1f | %zu | %.2f | %.3f | %.3f | %d | %.3f | %.3f | %.3f | %.1f | %.1f | %.1f | %.1f |\n", c.name.c_str(), c.skew,
                costs.size(), double(costs.size()) / sms, useful / multiplied, multiplied / sms / whole, split.pieces,
                whole / with_split, row_total * double(swap_n_tiles) / swap_multiplied, swap_loads / plain_loads,
                plain_loads * gb_per_load, swap_loads * gb_per_load, paired_swap_loads * gb_per_load,
                n_paired_swap_loads * gb_per_load);
  }
  // the tile order: plain (group index) and mixed (tile_order.h), in the wave model
  std::printf("\n| case | skew | wave model, plain order (ms) | wave model, mixed order (ms) | plain / mixed | bound: "
              "tensor cores (ms) | bound: DRAM (ms) |\n|---|---|---|---|---|---|---|\n");
  for (const auto& [c, g, sizes] : prefill) {
    const std::int64_t bn = g.n >= 256 ? 256 : 128, n_tiles = (g.n + bn - 1) / bn;
    const double full = 2.0 * 128 * double(bn) * double(g.k) / (tflops * 1e12 / sms);
    std::vector<std::vector<WaveTile>> groups;
    double compute = 0, bytes = 0;
    for (std::int64_t rows : sizes) {
      std::vector<WaveTile> tiles;
      const std::int64_t m_tiles = (rows + 127) / 128;
      for (std::int64_t n = 0; n < n_tiles; ++n) {
        for (std::int64_t m = 0; m < m_tiles; ++m) {
          const std::int64_t here = std::min<std::int64_t>(128, rows - m * 128);
          const double b = (m == 0 ? double(bn) * double(g.k) * 2 : 0) + (n == 0 ? double(here) * double(g.k) * 2 : 0);
          tiles.push_back({here > 64 ? full : full / 2, b});
          compute += tiles.back().seconds / sms;
          bytes += b;
        }
      }
      groups.push_back(tiles);
    }
    std::vector<int> order(groups.size());
    std::iota(order.begin(), order.end(), 0);
    auto flatten = [&](const std::vector<int>& o) {
      std::vector<WaveTile> flat;
      for (int i : o) flat.insert(flat.end(), groups[std::size_t(i)].begin(), groups[std::size_t(i)].end());
      return flat;
    };
    const std::vector<WaveTile> plain = flatten(order);
    std::vector<int> ranked(order.size());
    for (int i = 0; i < int(order.size()); ++i)
      ranked[std::size_t(ragdot_size_rank(i, int(order.size()), [&](int j) { return sizes[std::size_t(j)]; }))] = i;
    const std::vector<WaveTile> sorted = flatten(ranked);
    std::vector<WaveTile> mixed;
    for (unsigned u = 0; u < sorted.size(); ++u) mixed.push_back(sorted[ragdot_mixed_position(u, unsigned(sorted.size()))]);
    const double bw = dram_tbs * 1e12, t_plain = wave_model_seconds(plain, sms, bw), t_mixed = wave_model_seconds(mixed, sms, bw);
    std::printf("| %s | %.1f | %.3f | %.3f | %.3f | %.3f | %.3f |\n", c.name.c_str(), c.skew, t_plain * 1e3, t_mixed * 1e3,
                t_plain / t_mixed, compute * 1e3, bytes / bw * 1e3);
  }
  // 192 x 192 tiles on three consumer warpgroups (not built), alone and in m pairs sharing B
  std::printf("\n| case | skew | L2 to SMs, 128 x 256 (GB) | L2 to SMs, 128 x 256 in m pairs sharing B, cluster=2 (GB) | "
              "L2 to SMs, 192 x 192 (GB) | L2 to SMs, 192 x 192 in m pairs sharing B (GB) | 192 x 192 pairs / 128 x 256 | "
              "in-order efficiency, 128 x 256 | in-order efficiency, 192 x 192 |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& [c, g, sizes] : prefill) {
    const std::int64_t bn = g.n >= 256 ? 256 : 128, n_tiles = (g.n + bn - 1) / bn, wide_n_tiles = (g.n + 191) / 192;
    const double k_steps = double((g.k + 63) / 64);
    double plain = 0, plain_pairs = 0, wide = 0, wide_pairs = 0;  // rows or columns loaded
    std::vector<double> plain_costs, wide_costs;  // in k steps of a full tile's time, in the hand-out's order
    for (std::int64_t rows : sizes) {
      const std::int64_t m_tiles = (rows + 127) / 128, wide_m_tiles = (rows + 191) / 192;
      for (std::int64_t n = 0; n < n_tiles; ++n) {
        for (std::int64_t m = 0; m < m_tiles; ++m) {
          const std::int64_t here = std::min<std::int64_t>(128, rows - m * 128);
          plain += double((here + 63) / 64 * 64) + double(bn);  // A in boxes of 64 rows, B whole
          plain_pairs += double((here + 63) / 64 * 64) + (m % 2 == 0 ? double(bn) : 0.0);
          plain_costs.push_back(k_steps * double((here + 63) / 64) / 2.0);
        }
      }
      for (std::int64_t n = 0; n < wide_n_tiles; ++n) {
        for (std::int64_t m = 0; m < wide_m_tiles; ++m) {
          const std::int64_t here = std::min<std::int64_t>(192, rows - m * 192), a_rows = (here + 63) / 64 * 64;
          wide += double(a_rows) + 192.0;
          // (in pairs: the pair's second tile loads its rows only; an odd last tile alone loads both)
          wide_pairs += double(a_rows) + (m % 2 == 0 ? 192.0 : 0.0);
          wide_costs.push_back(k_steps * double(a_rows / 64) / 3.0);
        }
      }
    }
    const double gb_per_load = double(g.k) * 2.0 / 1e9;
    std::printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.3f | %.3f | %.3f |\n", c.name.c_str(), c.skew,
                plain * gb_per_load, plain_pairs * gb_per_load, wide * gb_per_load, wide_pairs * gb_per_load,
                wide_pairs / plain, in_order_efficiency(plain_costs, sms), in_order_efficiency(wide_costs, sms));
  }
  // the weight gradient: lhs [rows, K], rhs [rows, N], out [E, K, N] (bf16), tiles 128 x 256
  std::printf("\n| weight-gradient case | skew | groups resident in strips | L2 bytes, plain (GB) | L2 bytes, strips "
              "(GB) | strips / plain | strip units | in-order efficiency, strips | in-order efficiency, plain |\n"
              "|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& [c, g, sizes] : weight_gradients) {
    constexpr int kBN = 256;
    const int slots = ragdot_strip_b_slots(kBN);
    const std::int64_t m_tiles = (g.k + 127) / 128, n_tiles = (g.n + kBN - 1) / kBN;
    const double a_step = 128.0 * 64 * 2, b_step = double(kBN) * 64 * 2, out_tile = 128.0 * kBN * 2;
    double plain = 0, strips = 0;
    int resident_groups = 0;
    long long units = 0;
    std::vector<double> plain_costs, strip_costs;  // in k steps, in the hand-out's order
    for (std::int64_t rows : sizes) {
      const int k_steps = int((rows + 63) / 64);
      const bool resident = ragdot_strip_resident(k_steps, slots);
      resident_groups += resident;
      const double tile_cost = k_steps + epilogue_steps, tiles = double(m_tiles * n_tiles);
      plain += tiles * (k_steps * (a_step + b_step) + out_tile);
      for (std::int64_t t = 0; t < m_tiles * n_tiles; ++t) plain_costs.push_back(tile_cost);
      const long long group_units = ragdot_strip_units(k_steps, slots, int(m_tiles), int(n_tiles));
      units += group_units;
      for (long long u = 0; u < group_units; ++u) {
        int n_tile = 0, m_tile = 0, count = 0;
        ragdot_strip_unit(u, resident, int(m_tiles), &n_tile, &m_tile, &count);
        strip_costs.push_back(count * tile_cost);
        strips += count * (k_steps * a_step + out_tile) + (resident ? 1 : count) * k_steps * b_step;
      }
    }
    // (the strips do the plain tiles' work: their efficiency is taken against it)
    const double work = std::accumulate(plain_costs.begin(), plain_costs.end(), 0.0);
    std::printf("| %s | %.1f | %d of %zu | %.1f | %.1f | %.3f | %lld | %.3f | %.3f |\n", c.name.c_str(), c.skew,
                resident_groups, sizes.size(), plain / 1e9, strips / 1e9, strips / plain, units,
                work / sms / in_order_makespan(strip_costs, sms), in_order_efficiency(plain_costs, sms));
  }
  return 0;
}
