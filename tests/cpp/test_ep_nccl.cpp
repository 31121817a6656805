// Expert parallelism's NCCL transport on GPUs (ragdot/ep_transport.hpp): exchange_counts, plan,
// dispatch and combine put each row of ep_scenario.hpp's exchange exactly where it belongs, with
// an exact plan and with a padded one: the counts and rows a rank receives against what the senders
// made and, after the expert's rank changes every row, every row back at its sender's place.
//
// One rank (world size 1) runs in this process on GPU 0. Several ranks run as one process per
// GPU, this program again (EpRank.Exchange), bootstrapped through an id file: with
// RAGDOT_EP_RANKS=N (N = 1 too: the launcher path on one GPU), or on every GPU when there are
// two or more. Label "gpu": skipped where there is no GPU or no NCCL.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/device.hpp"
#include "ep_scenario.hpp"
#include "rank_gpu.hpp"
#include "ragdot/ep_transport.hpp"
#include "verify/ep_launch.hpp"

namespace ragdot {
namespace {

using ep::Communicator;
using ep::ExchangePlan;

using namespace ep_scenario;  // NOLINT: the scenario is this file's vocabulary


// The whole exchange on one rank with an exact plan, then with a padded one.
void check_exchange(Communicator& comm) {
  const int me = comm.rank(), world = comm.world_size();
  const int experts = kLocalExperts * world;
  RankGpu gpu(comm.device());
  const RankPairs mine = make_pairs(me, world);
  const Expected want = expected_at(me, world);

  void* counts = gpu.upload(mine.counts);
  void* recv_counts = gpu.alloc(std::size_t(experts) * sizeof(std::int32_t));
  ASSERT_TRUE(comm.exchange_counts(counts, recv_counts, experts, gpu.stream()).is_ok());
  EXPECT_EQ(gpu.download<std::int32_t>(recv_counts, std::size_t(experts)), want.recv_counts) << "rank " << me;

  auto host_plan = ExchangePlan::from_counts(mine.counts.data(), want.recv_counts.data(), world, experts);
  ASSERT_TRUE(host_plan.ok());
  const std::vector<std::uint32_t> want_back = expected_back(mine);
  void* send = gpu.upload(mine.rows);
  for (ep::Layout layout : {ep::Layout::kBySource, ep::Layout::kByExpert}) {
    SCOPED_TRACE(layout == ep::Layout::kByExpert ? "by expert" : "by source");
    auto plan = comm.plan(counts, recv_counts, experts, gpu.stream(), layout);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    auto host = ExchangePlan::from_counts(mine.counts.data(), want.recv_counts.data(), world, experts, layout);
    ASSERT_TRUE(host.ok());
    EXPECT_EQ(plan->to_string(), host->to_string());
    EXPECT_EQ(plan->local_group_sizes, host->local_group_sizes);
    const std::vector<std::uint32_t> rows = expected_rows(me, world, layout);
    ASSERT_EQ(plan->recv_capacity * kRowWords, std::int64_t(rows.size()));

    // rows to their experts' ranks, changed there, and back
    void* recv = gpu.alloc(std::size_t(plan->recv_capacity * kRowBytes));
    ASSERT_TRUE(comm.dispatch(*plan, send, recv, kRowBytes, gpu.stream()).is_ok());
    EXPECT_EQ(gpu.download<std::uint32_t>(recv, rows.size()), rows) << "rank " << me << " received";
    void* from = gpu.upload(processed_rows(rows, me));
    void* back = gpu.alloc(std::size_t(plan->send_capacity * kRowBytes));
    ASSERT_TRUE(comm.combine(*plan, from, back, kRowBytes, gpu.stream()).is_ok());
    EXPECT_EQ(gpu.download<std::uint32_t>(back, want_back.size()), want_back) << "rank " << me << " back";
  }

  // padded: slots of `cap` rows per rank, valid rows first; the counts stay on the device
  const std::int64_t cap = padded_capacity(world);
  const ExchangePlan padded = ExchangePlan::padded(world, cap);
  const std::size_t words = std::size_t(world * cap * kRowWords);
  void* psend = gpu.upload(slot(mine.rows, host_plan->send_rows, cap));
  void* precv = gpu.alloc(std::size_t(padded.recv_capacity * kRowBytes));
  ASSERT_TRUE(comm.dispatch(padded, psend, precv, kRowBytes, gpu.stream()).is_ok());
  EXPECT_EQ(unslot(gpu.download<std::uint32_t>(precv, words), host_plan->recv_rows, cap), want.rows)
      << "rank " << me << " received (padded)";
  void* pfrom = gpu.upload(slot(processed_rows(want.rows, me), host_plan->recv_rows, cap, 0));
  void* pback = gpu.alloc(std::size_t(padded.send_capacity * kRowBytes));
  ASSERT_TRUE(comm.combine(padded, pfrom, pback, kRowBytes, gpu.stream()).is_ok());
  EXPECT_EQ(unslot(gpu.download<std::uint32_t>(pback, words), host_plan->send_rows, cap), want_back)
      << "rank " << me << " back (padded)";
}

// A one-rank communicator on GPU 0, or a skip.


TEST(EpNcclOneRank, DispatchAndCombineAreIdentity) {
  REQUIRE_GPU_AND_NCCL();
  auto comm = one_rank();
  ASSERT_TRUE(comm.ok()) << comm.status().to_string();
  EXPECT_EQ(comm->world_size(), 1);
  EXPECT_NE(comm->native_handle(), nullptr);
  check_exchange(*comm);
}

TEST(EpNcclOneRank, BadCallsAreErrors) {
  REQUIRE_GPU_AND_NCCL();
  auto comm = one_rank();
  ASSERT_TRUE(comm.ok()) << comm.status().to_string();
  RankGpu gpu(comm->device());
  void* buf = gpu.alloc(1024);
  EXPECT_EQ(comm->exchange_counts(nullptr, buf, 4, gpu.stream()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->exchange_counts(buf, buf, 0, gpu.stream()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->plan(buf, nullptr, 4, gpu.stream()).status().code(), StatusCode::kInvalidArgument);
  const ExchangePlan two = ExchangePlan::padded(2, 4);
  EXPECT_EQ(comm->dispatch(two, buf, buf, 16, gpu.stream()).code(), StatusCode::kInvalidArgument);
  const ExchangePlan one = ExchangePlan::padded(1, 4);
  EXPECT_EQ(comm->dispatch(one, buf, nullptr, 16, gpu.stream()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(comm->combine(one, buf, buf, 0, gpu.stream()).code(), StatusCode::kInvalidArgument);
  ExchangePlan mismatched = one;
  mismatched.recv_rows[0] = 3;  // keeps 4 rows but expects 3 from itself
  EXPECT_EQ(comm->dispatch(mismatched, buf, buf, 16, gpu.stream()).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(comm->dispatch(one, buf, static_cast<char*>(buf) + 512, 16, gpu.stream()).is_ok());
}

// One rank of the multi-process test: runs only when the launcher started it.
TEST(EpRank, Exchange) {
  const char* marker_dir = std::getenv("RAGDOT_EP_TEST_MARKERS");
  if (!marker_dir) GTEST_SKIP() << "started by EpNcclRanks.EveryRowArrivesAndReturns";
  auto b = ep::bootstrap_from_env();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  auto comm = Communicator::create(*b);
  ASSERT_TRUE(comm.ok()) << comm.status().to_string();
  check_exchange(*comm);
  mark_rank_passed(marker_dir, comm->rank());
}

TEST(EpNcclRanks, EveryRowArrivesAndReturns) {
  REQUIRE_GPU_AND_NCCL();
  expect_every_rank_passes("EpRank.Exchange", 240);
}

}  // namespace
}  // namespace ragdot
