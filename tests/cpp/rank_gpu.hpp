// Shared by the expert-parallel GPU tests: device memory and a stream on one GPU of the machine
// (a rank's, not necessarily the first), freed at scope end, and the skip for machines without a
// GPU or without NCCL.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/device.hpp"
#include "ragdot/ep_transport.hpp"
#include "verify/ep_launch.hpp"

namespace ragdot {

// Device memory and a stream on one GPU.
class RankGpu {
 public:
  explicit RankGpu(int ordinal) {
    auto d = cuda::device(ordinal);
    EXPECT_TRUE(d.ok()) << d.status().to_string();
    if (!d.ok()) return;
    dev_ = *d;
    cuda::ScopedContext ctx(dev_->context);
    EXPECT_EQ(cuda::driver()->cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  }
  ~RankGpu() {
    if (!dev_) return;
    cuda::ScopedContext ctx(dev_->context);
    for (CUdeviceptr p : allocs_) cuda::driver()->cuMemFree(p);
    if (stream_) cuda::driver()->cuStreamDestroy(stream_);
  }
  RankGpu(const RankGpu&) = delete;
  RankGpu& operator=(const RankGpu&) = delete;

  void* stream() const { return stream_; }
  void* alloc(std::size_t bytes, unsigned char fill = 0xa5) {
    cuda::ScopedContext ctx(dev_->context);
    CUdeviceptr p = 0;
    EXPECT_EQ(cuda::driver()->cuMemAlloc(&p, std::max<std::size_t>(bytes, 4)), CUDA_SUCCESS);
    allocs_.push_back(p);
    EXPECT_EQ(cuda::driver()->cuMemsetD8Async(p, fill, std::max<std::size_t>(bytes, 4), stream_), CUDA_SUCCESS);
    return reinterpret_cast<void*>(p);
  }
  template <class T>
  void* upload(const std::vector<T>& v) {
    void* p = alloc(v.size() * sizeof(T));
    cuda::ScopedContext ctx(dev_->context);
    EXPECT_EQ(cuda::driver()->cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(p), v.data(), v.size() * sizeof(T),
                                                stream_),
              CUDA_SUCCESS);
    sync();
    return p;
  }
  template <class T>
  std::vector<T> download(const void* p, std::size_t count) {
    std::vector<T> v(count);
    sync();
    if (count == 0) return v;
    cuda::ScopedContext ctx(dev_->context);
    EXPECT_EQ(cuda::driver()->cuMemcpyDtoH(v.data(), reinterpret_cast<CUdeviceptr>(p), count * sizeof(T)),
              CUDA_SUCCESS);
    return v;
  }
  void sync() {
    cuda::ScopedContext ctx(dev_->context);
    EXPECT_EQ(cuda::driver()->cuStreamSynchronize(stream_), CUDA_SUCCESS);
  }

 private:
  const cuda::Device* dev_ = nullptr;
  CUstream stream_ = nullptr;
  std::vector<CUdeviceptr> allocs_;
};

// A communicator of one rank on GPU `device` (no launcher, no id file).
inline Result<ep::Communicator> one_rank(int device = 0) {
  auto id = ep::new_unique_id();
  if (!id.ok()) return id.status();
  ep::Bootstrap b;
  b.device = device;
  b.id = *id;
  return ep::Communicator::create(b);
}

#define REQUIRE_GPU_AND_NCCL()                                                                  \
  do {                                                                                          \
    std::string why_;                                                                           \
    if (cuda::device_count(&why_) < 1) GTEST_SKIP() << "no GPU here: " << why_;                 \
    if (auto v_ = ep::nccl_version(); !v_.ok()) GTEST_SKIP() << v_.status().message();          \
  } while (0)

// The multi-process side of a test: how many ranks to start (RAGDOT_EP_RANKS, else every GPU
// when there are two or more, else 0: skip).
inline int ranks_to_launch() {
  const int gpus = cuda::device_count();
  int ranks = gpus >= 2 ? gpus : 0;
  if (const char* n = std::getenv("RAGDOT_EP_RANKS")) ranks = std::atoi(n);
  return ranks;
}

// Runs this program once per rank (ranks_to_launch ranks; none: the calling test is skipped) with
// `--gtest_filter=rank_test` (a test that skips unless RAGDOT_EP_TEST_MARKERS is set, and writes
// <markers>/rank<r> when it passed) and expects every rank to exit 0 and leave its marker.
inline void expect_every_rank_passes(const std::string& rank_test, double timeout_s) {
  const int ranks = ranks_to_launch();
  if (ranks < 1) GTEST_SKIP() << "one GPU: set RAGDOT_EP_RANKS=1 to run the launcher with one rank";
  const int gpus = cuda::device_count();
  ASSERT_LE(ranks, gpus) << "NCCL takes one rank per GPU";
  const std::string dir = ::testing::TempDir() + "ragdot_ep_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()), 0);
  verify::RankLaunch launch;
  launch.argv = {"/proc/self/exe", "--gtest_filter=" + rank_test};
  launch.world_size = ranks;
  launch.gpus = gpus;
  launch.id_file = dir + "/nccl_id";
  launch.env = {{"RAGDOT_EP_TEST_MARKERS", dir}};
  launch.timeout_s = timeout_s;
  auto status = verify::run_ranks(launch);
  ASSERT_TRUE(status.ok()) << status.status().to_string();
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ((*status)[std::size_t(r)], 0) << "rank " << r << " failed (124: timed out)";
    EXPECT_TRUE(std::ifstream(dir + "/rank" + std::to_string(r)).good()) << "rank " << r << " did not finish";
  }
  std::system(("rm -rf '" + dir + "'").c_str());
}

// A rank started by expect_every_rank_passes leaves its marker when it has passed.
inline void mark_rank_passed(const char* marker_dir, int rank) {
  if (!::testing::Test::HasFailure()) std::ofstream(std::string(marker_dir) + "/rank" + std::to_string(rank)) << "ok\n";
}

}  // namespace ragdot
