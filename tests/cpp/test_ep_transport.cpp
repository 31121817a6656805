// The host side of expert parallelism (ragdot/ep_transport.hpp), no GPU needed: the NCCL unique id
// as hex and as a rendezvous file, the bootstrap from the environment, the exchange plans'
// arithmetic, the pieces every rank sends and receives (moved between ranks of this process with
// memcpy, as NCCL's matched send/receive pairs would: the GPU test's scenario, checked here), the
// per-rank process launcher, and clear errors (never a crash) where NCCL or a GPU is missing.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <thread>

#include "ep/exchange_pieces.hpp"
#include "ep_scenario.hpp"
#include "scoped_env.hpp"
#include "ragdot/ep_transport.hpp"
#include "verify/ep_launch.hpp"

namespace ragdot {
namespace {

using ep::Bootstrap;
using ep::ExchangePlan;
using ep::UniqueId;

using ragdot::testing::ScopedEnv;

UniqueId sample_id() {
  UniqueId id;
  for (std::size_t i = 0; i < id.bytes.size(); ++i) id.bytes[i] = static_cast<unsigned char>(i * 37 + 5);
  return id;
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "ragdot_ep_" + std::to_string(::getpid()) + "_" + name;
}

TEST(EpUniqueId, HexRoundTrip) {
  const UniqueId id = sample_id();
  const std::string hex = ep::to_hex(id);
  ASSERT_EQ(hex.size(), 256u);
  auto back = ep::unique_id_from_hex(hex);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->bytes, id.bytes);
  std::string upper = hex;
  for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_TRUE(ep::unique_id_from_hex(upper).ok());
}

TEST(EpUniqueId, BadHexIsAnError) {
  auto short_id = ep::unique_id_from_hex("abcd");
  EXPECT_EQ(short_id.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(short_id.status().message().find("256 hex digits"), std::string::npos);
  std::string bad = ep::to_hex(sample_id());
  bad[10] = 'x';
  EXPECT_EQ(ep::unique_id_from_hex(bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(EpUniqueId, FileRoundTripAndTimeout) {
  const std::string path = temp_path("id");
  ASSERT_TRUE(ep::write_unique_id_file(path, sample_id()).is_ok());
  auto back = ep::read_unique_id_file(path, 1.0);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->bytes, sample_id().bytes);
  std::remove(path.c_str());

  const auto start = std::chrono::steady_clock::now();
  auto missing = ep::read_unique_id_file(path, 0.1);
  EXPECT_EQ(missing.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(missing.status().message().find(path), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));

  std::ofstream(path) << "not an id\n";
  EXPECT_EQ(ep::read_unique_id_file(path, 1.0).status().code(), StatusCode::kInvalidArgument);
  for (double bad_wait : {-1.0, std::nan(""), std::numeric_limits<double>::infinity(), 1e300})
    EXPECT_EQ(ep::read_unique_id_file(path, bad_wait).status().code(), StatusCode::kInvalidArgument) << bad_wait;
  std::remove(path.c_str());
  EXPECT_EQ(ep::write_unique_id_file("", sample_id()).code(), StatusCode::kInvalidArgument);
}

TEST(EpUniqueId, ReaderWaitsForTheWriter) {
  const std::string path = temp_path("late_id");
  std::remove(path.c_str());
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(ep::write_unique_id_file(path, sample_id()).is_ok());
  });
  auto got = ep::read_unique_id_file(path, 30.0);
  writer.join();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->bytes, sample_id().bytes);
  std::remove(path.c_str());
}

TEST(EpBootstrap, FromEnvironment) {
  ScopedEnv rank("RAGDOT_EP_RANK", "2"), world("RAGDOT_EP_WORLD_SIZE", "4"), device("RAGDOT_EP_DEVICE", "1"),
      id("RAGDOT_EP_ID", ep::to_hex(sample_id())), file("RAGDOT_EP_ID_FILE", std::nullopt),
      timeout("RAGDOT_EP_TIMEOUT", "7");
  auto b = ep::bootstrap_from_env();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(b->rank, 2);
  EXPECT_EQ(b->world_size, 4);
  EXPECT_EQ(b->device, 1);
  ASSERT_TRUE(b->id.has_value());
  EXPECT_EQ(b->id->bytes, sample_id().bytes);
  EXPECT_EQ(b->timeout_s, 7.0);
  {
    ScopedEnv no_id("RAGDOT_EP_ID", std::nullopt), with_file("RAGDOT_EP_ID_FILE", "/tmp/some_id");
    auto f = ep::bootstrap_from_env();
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_FALSE(f->id.has_value());
    EXPECT_EQ(f->id_file, "/tmp/some_id");
  }
}

TEST(EpBootstrap, BadEnvironmentIsAnError) {
  ScopedEnv rank("RAGDOT_EP_RANK", "0"), world("RAGDOT_EP_WORLD_SIZE", "2"), device("RAGDOT_EP_DEVICE", std::nullopt),
      id("RAGDOT_EP_ID", std::nullopt), file("RAGDOT_EP_ID_FILE", std::nullopt), timeout("RAGDOT_EP_TIMEOUT", std::nullopt);
  auto expect_error = [](const char* needle) {
    auto b = ep::bootstrap_from_env();
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(b.status().message().find(needle), std::string::npos) << b.status().message();
  };
  expect_error("RAGDOT_EP_ID_FILE");  // neither an id nor a file
  ScopedEnv with_file("RAGDOT_EP_ID_FILE", "/tmp/x");
  {
    ScopedEnv r("RAGDOT_EP_RANK", "2");
    expect_error("RAGDOT_EP_RANK=2");
  }
  {
    ScopedEnv w("RAGDOT_EP_WORLD_SIZE", "zero");
    expect_error("RAGDOT_EP_WORLD_SIZE");
  }
  {
    ScopedEnv w("RAGDOT_EP_WORLD_SIZE", std::nullopt);
    expect_error("must both be set");
  }
  {
    ScopedEnv d("RAGDOT_EP_DEVICE", "-1");
    expect_error("RAGDOT_EP_DEVICE");
  }
  {
    ScopedEnv i("RAGDOT_EP_ID", "beef");
    expect_error("RAGDOT_EP_ID");
  }
  EXPECT_TRUE(ep::bootstrap_from_env().ok());
}

TEST(EpPlan, FromCounts) {
  // 2 ranks, 4 experts (2 each). This rank has 3, 0 rows for experts 0, 1 (rank 0) and 1, 4 for
  // experts 2, 3 (rank 1); rank 0 sends it 2 + 2 rows, rank 1 0 + 0.
  const std::int32_t counts[] = {3, 0, 1, 4};
  const std::int32_t recv[] = {2, 2, 0, 0};
  auto p = ExchangePlan::from_counts(counts, recv, 2, 4);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->send_rows, (std::vector<std::int64_t>{3, 5}));
  EXPECT_EQ(p->send_offsets, (std::vector<std::int64_t>{0, 3}));
  EXPECT_EQ(p->recv_rows, (std::vector<std::int64_t>{4, 0}));
  EXPECT_EQ(p->recv_offsets, (std::vector<std::int64_t>{0, 4}));
  EXPECT_EQ(p->send_capacity, 8);
  EXPECT_EQ(p->recv_capacity, 4);
  EXPECT_EQ(p->to_string(), "ep plan world=2 by source send=[3,5] recv=[4,0]");
  EXPECT_EQ(p->counts, (std::vector<std::int64_t>{3, 0, 1, 4}));
  EXPECT_EQ(p->recv_counts, (std::vector<std::int64_t>{2, 2, 0, 0}));
  EXPECT_EQ(p->local_group_sizes, (std::vector<std::int64_t>{2, 2}));

  auto one = ExchangePlan::from_counts(counts, counts, 1, 4);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->send_rows, (std::vector<std::int64_t>{8}));
  EXPECT_EQ(one->recv_rows, (std::vector<std::int64_t>{8}));
}

TEST(EpPlan, BadCountsAreAnError) {
  const std::int32_t counts[] = {3, -1, 1, 4};
  const std::int32_t ok[] = {0, 0, 0, 0};
  EXPECT_EQ(ExchangePlan::from_counts(counts, ok, 2, 4).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ExchangePlan::from_counts(ok, ok, 3, 4).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ExchangePlan::from_counts(nullptr, ok, 2, 4).status().code(), StatusCode::kInvalidArgument);
}

TEST(EpPlan, Padded) {
  const ExchangePlan p = ExchangePlan::padded(3, 5);
  EXPECT_EQ(p.send_rows, (std::vector<std::int64_t>{5, 5, 5}));
  EXPECT_EQ(p.send_offsets, (std::vector<std::int64_t>{0, 5, 10}));
  EXPECT_EQ(p.recv_offsets, p.send_offsets);
  EXPECT_EQ(p.send_capacity, 15);
  EXPECT_EQ(p.recv_capacity, 15);
}

// Every rank's pieces to their peers: what NCCL's matched send and receive pairs do.
void move_pieces(const std::vector<ep::Pieces>& ranks) {
  const std::size_t world = ranks.size();
  for (std::size_t s = 0; s < world; ++s) {
    ASSERT_TRUE(ep::check_own_piece(ranks[s], int(s)).is_ok());
    for (std::size_t d = 0; d < world; ++d) {
      const auto out = ep::nonempty(ranks[s].to[d]), in = ep::nonempty(ranks[d].from[s]);
      ASSERT_EQ(out.size(), in.size()) << "rank " << s << " sends " << out.size() << " pieces, rank " << d
                                       << " expects " << in.size();
      for (std::size_t i = 0; i < out.size(); ++i) {
        ASSERT_EQ(out[i].bytes, in[i].bytes) << "piece " << i << " from rank " << s << " to rank " << d;
        std::memcpy(const_cast<void*>(in[i].ptr), out[i].ptr, out[i].bytes);
      }
    }
  }
}

TEST(EpExchange, EveryRowArrivesAndReturnsOnTheHost) {
  using namespace ep_scenario;  // NOLINT
  for (int world = 1; world <= 4; ++world) {
    SCOPED_TRACE("world " + std::to_string(world));
    const int experts = kLocalExperts * world;
    std::vector<RankPairs> mine;
    const auto ranks = std::size_t(world);
    auto recv_counts = std::vector<std::vector<std::int32_t>>(ranks, std::vector<std::int32_t>(std::size_t(experts)));
    std::vector<ep::Pieces> pieces;
    for (int r = 0; r < world; ++r) {
      mine.push_back(make_pairs(r, world));
      pieces.push_back(ep::count_pieces(mine.back().counts.data(), recv_counts[std::size_t(r)].data(), world, experts));
    }
    move_pieces(pieces);
    if (world >= 2) EXPECT_NE(expected_by_expert(0, world), expected_at(0, world).rows) << "the layouts differ";
    for (ep::Layout layout : {ep::Layout::kBySource, ep::Layout::kByExpert}) {
      SCOPED_TRACE(layout == ep::Layout::kByExpert ? "by expert" : "by source");
      std::vector<ExchangePlan> plans;
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(recv_counts[std::size_t(r)], expected_at(r, world).recv_counts);
        auto p = ExchangePlan::from_counts(mine[std::size_t(r)].counts.data(), recv_counts[std::size_t(r)].data(), world,
                                           experts, layout);
        ASSERT_TRUE(p.ok()) << p.status().to_string();
        plans.push_back(*p);
      }
      if (world >= 2) EXPECT_EQ(plans.back().recv_capacity, 0) << "the last rank receives nothing";
      if (world >= 3) EXPECT_EQ(plans[0].send_rows[1], 0) << "rank 0 sends rank 1 nothing";
      EXPECT_EQ(plans[0].local_group_sizes[1], 0) << "expert 1 gets nothing";

      // dispatch, a change by the expert's rank, combine
      std::vector<std::vector<std::uint32_t>> recv, from, back;
      pieces.clear();
      for (int r = 0; r < world; ++r) {
        recv.emplace_back(std::size_t(plans[std::size_t(r)].recv_capacity * kRowWords), 0u);
        pieces.push_back(ep::dispatch_pieces(plans[std::size_t(r)], mine[std::size_t(r)].rows.data(),
                                             recv.back().data(), kRowBytes));
      }
      move_pieces(pieces);
      pieces.clear();
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(recv[std::size_t(r)], expected_rows(r, world, layout)) << "rank " << r << " received";
        from.push_back(processed_rows(recv[std::size_t(r)], r));
        back.emplace_back(std::size_t(plans[std::size_t(r)].send_capacity * kRowWords), 0u);
        pieces.push_back(ep::combine_pieces(plans[std::size_t(r)], from.back().data(), back.back().data(), kRowBytes));
      }
      move_pieces(pieces);
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(back[std::size_t(r)], expected_back(mine[std::size_t(r)])) << "rank " << r << " back";
      }
    }

    // padded plans: the same rows in fixed slots (the exact plans say which rows of a slot count)
    std::vector<ExchangePlan> plans;
    for (int r = 0; r < world; ++r) {
      plans.push_back(*ExchangePlan::from_counts(mine[std::size_t(r)].counts.data(), recv_counts[std::size_t(r)].data(),
                                                 world, experts));
    }
    const std::int64_t cap = padded_capacity(world);
    const ExchangePlan padded = ExchangePlan::padded(world, cap);
    std::vector<std::vector<std::uint32_t>> psend, pfrom;
    auto precv = std::vector<std::vector<std::uint32_t>>(ranks), pback = precv;
    pieces.clear();
    for (int r = 0; r < world; ++r) {
      psend.push_back(slot(mine[std::size_t(r)].rows, plans[std::size_t(r)].send_rows, cap));
      precv[std::size_t(r)].assign(psend.back().size(), 0u);
      pieces.push_back(ep::dispatch_pieces(padded, psend.back().data(), precv[std::size_t(r)].data(), kRowBytes));
    }
    move_pieces(pieces);
    pieces.clear();
    for (int r = 0; r < world; ++r) {
      const auto& p = plans[std::size_t(r)];
      EXPECT_EQ(unslot(precv[std::size_t(r)], p.recv_rows, cap), expected_at(r, world).rows);
      pfrom.push_back(slot(processed_rows(unslot(precv[std::size_t(r)], p.recv_rows, cap), r), p.recv_rows, cap, 0));
      pback[std::size_t(r)].assign(pfrom.back().size(), 0u);
      pieces.push_back(ep::combine_pieces(padded, pfrom.back().data(), pback[std::size_t(r)].data(), kRowBytes));
    }
    move_pieces(pieces);
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(unslot(pback[std::size_t(r)], plans[std::size_t(r)].send_rows, cap), expected_back(mine[std::size_t(r)]));
    }
  }
}

TEST(EpExchange, PlanChecks) {
  const ExchangePlan two = ExchangePlan::padded(2, 3);
  int buf = 0;
  EXPECT_TRUE(ep::check_plan(two, 2, 16, &buf, &buf, "dispatch").is_ok());
  EXPECT_EQ(ep::check_plan(two, 3, 16, &buf, &buf, "dispatch").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ep::check_plan(two, 2, 0, &buf, &buf, "dispatch").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ep::check_plan(two, 2, 16, nullptr, &buf, "dispatch").code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ep::check_plan(ExchangePlan::padded(2, 0), 2, 16, nullptr, nullptr, "dispatch").is_ok());
  EXPECT_EQ(ep::check_plan(ExchangePlan::padded(2, -1), 2, 16, &buf, &buf, "dispatch").code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ep::check_counts(&buf, &buf, 2, 3, "exchange_counts").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ep::check_counts(&buf, nullptr, 2, 4, "exchange_counts").code(), StatusCode::kInvalidArgument);
  ExchangePlan mismatched = two;
  mismatched.recv_rows[1] = 2;
  EXPECT_EQ(ep::check_own_piece(ep::dispatch_pieces(mismatched, &buf, &buf, 16), 1).code(),
            StatusCode::kInvalidArgument);
  ExchangePlan no_counts = two;
  no_counts.layout = ep::Layout::kByExpert;  // a padded plan has no per-expert counts
  EXPECT_EQ(ep::check_plan(no_counts, 2, 16, &buf, &buf, "dispatch").code(), StatusCode::kInvalidArgument);
  // rows past a buffer's capacity, by offset or by count, and capacities whose bytes overflow
  for (int field = 0; field < 5; ++field) {
    ExchangePlan past = two;
    if (field == 0) past.send_offsets[1] = 4;
    if (field == 1) past.recv_rows[1] = 4;
    if (field == 2) past.send_offsets[1] = std::numeric_limits<std::int64_t>::max();
    if (field == 3) past.recv_capacity = std::numeric_limits<std::int64_t>::max() / 8;
    if (field == 4) past.send_capacity = -1;
    EXPECT_EQ(ep::check_plan(past, 2, 16, &buf, &buf, "dispatch").code(), StatusCode::kInvalidArgument) << field;
  }
  // an exact by-expert plan passes; negative or excess per-expert counts do not
  const std::int32_t counts[4] = {1, 2, 0, 3}, recv_counts[4] = {2, 0, 1, 1};
  auto exact = ExchangePlan::from_counts(counts, recv_counts, 2, 4, ep::Layout::kByExpert);
  ASSERT_TRUE(exact.ok()) << exact.status().to_string();
  EXPECT_TRUE(ep::check_plan(*exact, 2, 16, &buf, &buf, "dispatch").is_ok());
  ExchangePlan negative = *exact, excess = *exact;
  negative.counts[0] = -1;
  excess.recv_counts[3] = 100;
  EXPECT_EQ(ep::check_plan(negative, 2, 16, &buf, &buf, "dispatch").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ep::check_plan(excess, 2, 16, &buf, &buf, "dispatch").code(), StatusCode::kInvalidArgument);
}

TEST(EpNccl, MissingNcclIsAClearError) {
  ScopedEnv lib("RAGDOT_NCCL_LIBRARY", "/nonexistent/libnccl.so.2");
  auto version = ep::nccl_version();
  ASSERT_FALSE(version.ok());
  EXPECT_EQ(version.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(version.status().message().find("NCCL"), std::string::npos) << version.status().message();
  EXPECT_EQ(ep::new_unique_id().status().code(), StatusCode::kUnavailable);
  Bootstrap b;
  b.id = sample_id();
  auto comm = ep::Communicator::create(b);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(comm.status().message().empty());
}

TEST(EpNccl, WithoutAGpuCreateIsAnError) {
  // Where NCCL loads (as here: ncclGetUniqueId needs no GPU) a fresh id works; a communicator then
  // needs a GPU. On a GPU machine this makes a real one-rank communicator.
  auto id = ep::new_unique_id();
  if (!id.ok()) {
    EXPECT_EQ(id.status().code(), StatusCode::kUnavailable);
    GTEST_SKIP() << "NCCL not here: " << id.status().message();
  }
  Bootstrap b;
  b.id = *id;
  auto comm = ep::Communicator::create(b);
  if (comm.ok()) {
    EXPECT_EQ(comm->world_size(), 1);
    return;
  }
  EXPECT_EQ(comm.status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(comm.status().message().empty());
  Bootstrap bad = b;
  bad.rank = 3;
  EXPECT_EQ(ep::Communicator::create(bad).status().code(), StatusCode::kInvalidArgument);
}

TEST(EpLaunch, RunsEveryRankWithItsEnvironment) {
  verify::RankLaunch l;
  l.argv = {"/bin/sh", "-c",
            "test \"$NCCL_NVLS_ENABLE\" = 0 && test \"$RAGDOT_EP_WORLD_SIZE\" = 3 && test \"$EXTRA\" = yes && "
            "test \"$(env | grep -c '^EXTRA=')\" = 1 && "
            "test \"$RAGDOT_EP_DEVICE\" = $((RAGDOT_EP_RANK % 2)) && exit $((RAGDOT_EP_RANK + 10))"};
  l.world_size = 3;
  l.gpus = 2;
  l.env = {{"EXTRA", "no"}, {"EXTRA", "yes"}};  // the later one wins
  auto st = verify::run_ranks(l);
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  EXPECT_EQ(*st, (std::vector<int>{10, 11, 12}));
}

TEST(EpLaunch, KillsRanksAtTheTimeout) {
  verify::RankLaunch l;
  l.argv = {"/bin/sh", "-c", "test $RAGDOT_EP_RANK = 0 || exec sleep 30"};
  l.world_size = 2;
  l.timeout_s = 0.3;
  const auto start = std::chrono::steady_clock::now();
  auto st = verify::run_ranks(l);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(*st, (std::vector<int>{0, 124}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace ragdot
