#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "ragdot/workloads.hpp"

namespace ragdot::workloads {
namespace {

TEST(Workloads, PresetsMatchTheModelConfigs) {
  auto m = find_preset("mixtral-8x7b");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->hidden, 4096);
  EXPECT_EQ(m->expert_ffn, 14336);
  EXPECT_EQ(m->experts, 8);
  EXPECT_EQ(m->top_k, 2);
  auto d = find_preset("deepseek-v3");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->experts, 256);
  EXPECT_EQ(d->top_k, 8);
  EXPECT_EQ(d->shared_experts, 1);
  EXPECT_TRUE(find_preset("qwen3").ok());
  auto bad = find_preset("gpt-5");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown model preset 'gpt-5'"), std::string::npos);
  auto g = layer_gemms(*m, 4096);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].m, 8192);
  EXPECT_EQ(g[0].k, 4096);
  EXPECT_EQ(g[0].n, 28672);
  EXPECT_EQ(g[1].k, 14336);
  EXPECT_EQ(g[1].n, 4096);
}

TEST(Workloads, RoutingIsSeededAndCountsEveryAssignment) {
  auto a = route_group_sizes(1000, 8, 64, 0.0, 42);
  auto b = route_group_sizes(1000, 8, 64, 0.0, 42);
  auto c = route_group_sizes(1000, 8, 64, 0.0, 43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(std::accumulate(a.begin(), a.end(), std::int64_t(0)), 8000);
  for (auto x : a) EXPECT_LE(x, 1000) << "an expert appears at most once per token";
}

TEST(Workloads, SkewConcentratesTokens) {
  auto uni = route_group_sizes(4096, 2, 8, 0.0, 1);
  auto skew = route_group_sizes(4096, 2, 8, 1.2, 1);
  EXPECT_LT(*std::max_element(uni.begin(), uni.end()), 1300);
  EXPECT_GT(*std::max_element(skew.begin(), skew.end()), 2000);
  EXPECT_EQ(skew[0], *std::max_element(skew.begin(), skew.end())) << "rank 1 is the most popular expert";
}

TEST(Workloads, DecodeLeavesExpertsEmpty) {
  auto d = route_group_sizes(4, 8, 256, 0.0, 3);
  EXPECT_GE(std::count(d.begin(), d.end(), 0), 256 - 32);
}

}  // namespace
}  // namespace ragdot::workloads
