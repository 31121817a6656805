#include "backends/cuda/variant_timing.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <thread>

#include "backends/cuda/uniform_fill.hpp"
#include "core/env.hpp"
#include "core/half.hpp"

namespace ragdot::cuda {

namespace {

constexpr int kWarmups = 2;
constexpr int kRounds = 7;                 // interleaved rounds: each candidate timed once per round
constexpr double kSampleTargetUs = 1000;   // launches per sample: enough for about a millisecond
constexpr int kMaxLaunchesPerSample = 64;

// Device memory of the trial, freed at scope end (the trial's context is current throughout).
class TrialBuffer {
 public:
  TrialBuffer() = default;
  TrialBuffer(const TrialBuffer&) = delete;
  TrialBuffer& operator=(const TrialBuffer&) = delete;
  ~TrialBuffer() {
    if (ptr_) driver()->cuMemFree(ptr_);
  }
  Status allocate(std::size_t bytes, const char* what) {
    bytes_ = std::max<std::size_t>(bytes, 256);
    const CUresult r = driver()->cuMemAlloc(&ptr_, bytes_);
    if (r != CUDA_SUCCESS) {
      ptr_ = 0;
      return resource_exhausted("measuring candidate kernels needs " + std::to_string(bytes_) + " bytes of device memory for " +
                                what + ": " + cu_status(r, "cuMemAlloc").message());
    }
    return Status::ok();
  }
  void* data() const { return reinterpret_cast<void*>(ptr_); }
  std::size_t bytes() const { return bytes_; }
  ConstBuffer in() const { return {data(), bytes_, MemorySpace::kDevice}; }
  MutableBuffer out() const { return {data(), bytes_, MemorySpace::kDevice}; }

 private:
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
};

// The trial's stream and its two timing events. Declared after the trial's buffers, so that it is
// destroyed first: its destructor waits for what is still queued before they are freed.
class TrialStream {
 public:
  TrialStream() = default;
  TrialStream(const TrialStream&) = delete;
  TrialStream& operator=(const TrialStream&) = delete;
  ~TrialStream() {
    if (stream) {
      driver()->cuStreamSynchronize(stream);
      driver()->cuStreamDestroy(stream);
    }
    for (CUevent e : events)
      if (e) driver()->cuEventDestroy(e);
  }
  Status create() {
    RAGDOT_CU_RETURN_IF_ERROR(driver()->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    for (CUevent& e : events) RAGDOT_CU_RETURN_IF_ERROR(driver()->cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
    return Status::ok();
  }
  CUstream stream = nullptr;
  CUevent events[2] = {nullptr, nullptr};
};

// Queues a copy of `v` into `b` on the trial stream; `v` must live until the stream is synchronized.
template <class T>
Status upload(const TrialBuffer& b, const std::vector<T>& v, CUstream stream) {
  if (v.empty()) return Status::ok();
  RAGDOT_CU_RETURN_IF_ERROR(driver()->cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(b.data()), v.data(),
                                                        v.size() * sizeof(T), stream),
                            "cuMemcpyHtoDAsync (trial operands)");
  return Status::ok();
}

// Waits for `event` at most kWaitSeconds: a candidate kernel that never finishes (a deadlocked
// pipeline) fails the trial with a message instead of hanging the caller's planning forever.
constexpr double kWaitSeconds = 30.0;
Status wait_for(CUevent event, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kWaitSeconds);
  for (;;) {
    const CUresult r = driver()->cuEventQuery(event);
    if (r == CUDA_SUCCESS) return Status::ok();
    if (r != CUDA_ERROR_NOT_READY) return cu_status(r, what.c_str());
    if (std::chrono::steady_clock::now() > deadline)
      return internal_error(what + ": did not finish within " + std::to_string(int(kWaitSeconds)) +
                            " s (the device may need a reset)");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

float element(const unsigned char* p, std::size_t i, DType dtype) {
  if (dtype == DType::kF32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return dtype == DType::kF16 ? core::f16_to_f32(h) : core::bf16_to_f32(h);
}

// Everything queued on the trial stream so far, done (or an error naming `what`).
Status finish(const TrialStream& s, const std::string& what) {
  RAGDOT_CU_RETURN_IF_ERROR(driver()->cuEventRecord(s.events[1], s.stream), "cuEventRecord");
  return wait_for(s.events[1], what);
}

// Runs `launches` executes between the stream's two events; the time of one, in microseconds.
Result<double> time_launches(const detail::BackendPlan& plan, const ExecuteArgs& args, const TrialStream& s,
                             int launches, const std::string& name) {
  const DriverApi* d = driver();
  RAGDOT_CU_RETURN_IF_ERROR(d->cuEventRecord(s.events[0], s.stream), "cuEventRecord");
  for (int i = 0; i < launches; ++i) RAGDOT_RETURN_IF_ERROR(plan.execute(args));
  RAGDOT_RETURN_IF_ERROR(finish(s, "running candidate " + name));
  float ms = 0.0f;
  RAGDOT_CU_RETURN_IF_ERROR(d->cuEventElapsedTime(&ms, s.events[0], s.events[1]), "cuEventElapsedTime");
  return 1000.0 * double(ms) / launches;
}

}  // namespace

double output_disagreement(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, DType dtype) {
  const std::size_t n = std::min(a.size(), b.size()) / dtype_size(dtype);
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double sum_sq = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = element(b.data(), i, dtype);
    if (std::isfinite(v)) sum_sq += v * v;
  }
  const double rms = n ? std::sqrt(sum_sq / double(n)) : 0.0;
  double worst = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double x = element(a.data(), i, dtype), y = element(b.data(), i, dtype);
    if (std::isnan(x) != std::isnan(y) || std::isinf(x) != std::isinf(y)) return std::numeric_limits<double>::infinity();
    if (std::isnan(x) || std::isinf(x)) continue;
    const double scale = std::abs(y) + rms;
    const double diff = std::abs(x - y);
    if (diff > 0.0) worst = std::max(worst, scale > 0.0 ? diff / scale : std::numeric_limits<double>::infinity());
  }
  return worst;
}

Result<std::vector<TrialTiming>> time_candidates(const Device& device, const core::GroupGemmProblem& p,
                                                 const std::vector<Candidate>& candidates,
                                                 const std::vector<std::int64_t>& group_sizes, const PlanMaker& make) {
  std::vector<TrialTiming> out(candidates.size());
  if (candidates.empty()) return out;
  std::vector<std::unique_ptr<detail::BackendPlan>> plans(candidates.size());
  std::size_t workspace = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    auto plan = make(candidates[i].variant);
    if (!plan.ok()) {
      if (i == 0) return plan.status();
      out[i].note = "not planned: " + plan.status().message();
      continue;
    }
    plans[i] = std::move(*plan);
    workspace = std::max(workspace, plans[i]->workspace_bytes);
  }

  ScopedContext scope(device.context);
  RAGDOT_RETURN_IF_ERROR(scope.status());
  const DType out_type = p.out_buffer_dtype();
  const std::size_t out_bytes = std::size_t(p.out_elements) * dtype_size(out_type);
  TrialBuffer lhs, rhs, gs, offset, lhs_rows, out_rows, row_scales, result, ws;
  TrialStream s;  // (after the buffers: see TrialStream)
  RAGDOT_RETURN_IF_ERROR(s.create());
  RAGDOT_RETURN_IF_ERROR(lhs.allocate(std::size_t(p.lhs_elements) * dtype_size(p.lhs_dtype), "lhs"));
  RAGDOT_RETURN_IF_ERROR(rhs.allocate(std::size_t(p.rhs_elements) * dtype_size(p.rhs_dtype), "rhs"));
  RAGDOT_RETURN_IF_ERROR(gs.allocate(std::size_t(p.gs_elements) * dtype_size(p.gs_dtype), "group sizes"));
  RAGDOT_RETURN_IF_ERROR(offset.allocate(4, "the group offset"));
  // one index per gathered row: m in mode 1, the contracting k in mode 2
  const std::int64_t gathered_rows = p.mode == RaggedMode::kContracting ? p.k : p.m;
  RAGDOT_RETURN_IF_ERROR(lhs_rows.allocate(std::size_t(gathered_rows) * 4, "row indices"));
  RAGDOT_RETURN_IF_ERROR(out_rows.allocate(std::size_t(p.m) * 4, "row indices"));
  RAGDOT_RETURN_IF_ERROR(row_scales.allocate(std::size_t(p.m) * 4, "row scales"));
  RAGDOT_RETURN_IF_ERROR(result.allocate(out_bytes, "the output"));
  RAGDOT_RETURN_IF_ERROR(ws.allocate(workspace, "the workspace"));

  // trial operands: uniform values in [-1, 1), group sizes as given, an offset of 0, row indices
  // that scatter like an MoE layer's (gathered rows spread over the table, each table row taking
  // several output rows), scales of 0.5
  RAGDOT_RETURN_IF_ERROR(fill_uniform(device, lhs.data(), p.lhs_dtype, p.lhs_elements, 0x5eed1, 1.0f, s.stream));
  RAGDOT_RETURN_IF_ERROR(fill_uniform(device, rhs.data(), p.rhs_dtype, p.rhs_elements, 0x5eed2, 1.0f, s.stream));
  std::vector<std::int64_t> sizes64;
  for (std::int64_t row = 0; p.num_groups > 0 && row < p.gs_elements / p.num_groups; ++row)
    sizes64.insert(sizes64.end(), group_sizes.begin(), group_sizes.end());
  const std::vector<std::int32_t> sizes32(sizes64.begin(), sizes64.end()), zero{0};
  std::vector<std::int32_t> gather(static_cast<std::size_t>(gathered_rows)), scatter(static_cast<std::size_t>(p.m));
  const std::int64_t table_in = std::max<std::int64_t>(p.lhs_gather_rows.value_or(1), 1);
  const std::int64_t table_out = std::max<std::int64_t>(p.out_scatter_rows.value_or(1), 1);
  for (std::int64_t i = 0; i < gathered_rows; ++i) gather[std::size_t(i)] = std::int32_t((i * 40503 + 7) % table_in);
  for (std::int64_t i = 0; i < p.m; ++i) scatter[std::size_t(i)] = std::int32_t(i % table_out);
  const std::vector<float> scales(std::size_t(p.m), 0.5f);
  RAGDOT_RETURN_IF_ERROR(p.gs_dtype == DType::kI64 ? upload(gs, sizes64, s.stream) : upload(gs, sizes32, s.stream));
  RAGDOT_RETURN_IF_ERROR(upload(offset, zero, s.stream));
  RAGDOT_RETURN_IF_ERROR(upload(lhs_rows, gather, s.stream));
  RAGDOT_RETURN_IF_ERROR(upload(out_rows, scatter, s.stream));
  RAGDOT_RETURN_IF_ERROR(upload(row_scales, scales, s.stream));
  RAGDOT_RETURN_IF_ERROR(finish(s, "preparing the trial operands"));  // the host vectors may go now

  ExecuteArgs args;
  args.lhs = lhs.in();
  args.rhs = rhs.in();
  args.group_sizes = gs.in();
  args.group_offset = offset.in();
  args.out = result.out();
  args.workspace = ws.out();
  args.stream = s.stream;
  args.lhs_rows = lhs_rows.in();
  args.out_rows = out_rows.in();
  args.row_scales = row_scales.in();

  // warm-up and launches per sample; a candidate that fails here is dropped (a fault that leaves
  // the context unusable fails the next step too, and with it the trial)
  // A candidate that fails is dropped, with its reason; the planner's choice failing ends the
  // trial (a fault that leaves the context unusable fails every later step too).
  auto drop = [&](std::size_t i, const Status& why) -> Status {
    if (i == 0) return why;
    out[i].note = "failed: " + why.message();
    out[i].us = -1.0;
    plans[i].reset();
    return Status::ok();
  };
  std::vector<int> launches(candidates.size(), 0);
  for (std::size_t i = 0; i < plans.size(); ++i) {
    if (!plans[i]) continue;
    // (named before its first launch: a candidate that never finishes is then the last one named)
    if (env::print_plan())
      std::fprintf(stderr, "ragdot:   first launch of %s %s\n", candidates[i].spec.empty() ? "(planner)" : candidates[i].spec.c_str(),
                   candidates[i].variant.name().c_str());
    Status st;
    for (int w = 0; w < kWarmups && st.is_ok(); ++w) st = plans[i]->execute(args);
    Result<double> once = st.is_ok() ? time_launches(*plans[i], args, s, 1, candidates[i].variant.name()) : Result<double>(st);
    if (!once.ok()) {
      RAGDOT_RETURN_IF_ERROR(drop(i, once.status()));
      continue;
    }
    launches[i] = int(std::clamp(std::ceil(kSampleTargetUs / std::max(*once, 1.0)), 1.0, double(kMaxLaunchesPerSample)));
  }
  // interleaved rounds, so that clocks drifting over the trial favour no candidate
  std::vector<std::vector<double>> samples(candidates.size());
  for (int round = 0; round < kRounds; ++round)
    for (std::size_t i = 0; i < plans.size(); ++i) {
      if (!plans[i]) continue;
      const Result<double> us = time_launches(*plans[i], args, s, launches[i], candidates[i].variant.name());
      if (us.ok()) samples[i].push_back(*us);
      else RAGDOT_RETURN_IF_ERROR(drop(i, us.status()));
    }
  for (std::size_t i = 0; i < plans.size(); ++i) {
    if (!plans[i]) continue;
    std::sort(samples[i].begin(), samples[i].end());
    out[i].us = samples[i][samples[i].size() / 2];
  }

  // the cross-check: each candidate's output (a scatter table from zeros, any other output from
  // NaN bytes) against the planner's choice's
  // (the products are rounded to the op's output dtype before any scatter table adds them in f32:
  // that rounding is where two candidates' k orders may differ by a step)
  const bool accumulates = p.out_scatter_rows.has_value();
  const double tolerance = p.out_dtype == DType::kF32 ? 1e-3 : 1.0 / 32;
  std::vector<unsigned char> reference, got;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    if (!plans[i]) continue;
    RAGDOT_CU_RETURN_IF_ERROR(driver()->cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(result.data()),
                                                        accumulates ? 0x00 : 0xff, result.bytes(), s.stream),
                              "cuMemsetD8Async (poisoning the trial output)");
    Status ran = plans[i]->execute(args);
    if (ran.is_ok()) ran = finish(s, "running candidate " + candidates[i].variant.name());
    if (!ran.is_ok()) {
      RAGDOT_RETURN_IF_ERROR(drop(i, ran));
      continue;
    }
    std::vector<unsigned char>& into = i == 0 ? reference : got;
    into.resize(out_bytes);
    if (out_bytes)
      RAGDOT_CU_RETURN_IF_ERROR(
          driver()->cuMemcpyDtoH(into.data(), reinterpret_cast<CUdeviceptr>(result.data()), out_bytes),
          "cuMemcpyDtoH (the trial output)");
    if (i == 0) continue;
    const double off = output_disagreement(got, reference, out_type);
    if (!(off <= tolerance)) {
      out[i].note = "rejected: its output disagrees with the planner's choice's (relative difference " +
                    std::to_string(off) + ")";
      out[i].us = -1.0;
    }
  }
  return out;
}

}  // namespace ragdot::cuda
