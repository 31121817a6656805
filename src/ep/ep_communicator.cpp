// The NCCL communicator of one rank and the exchanges of expert parallelism: grouped ncclSend /
// ncclRecv pairs with every other rank on the caller's stream, and a device copy for the rows a
// rank keeps. Built with CUDA; ep_communicator_none.cpp stands in otherwise.
#include <cstring>

#include "backends/cuda/cuda_driver.hpp"
#include "backends/cuda/device.hpp"
#include "ep/exchange_pieces.hpp"
#include "ep/nccl_library.hpp"
#include "ragdot/ep_transport.hpp"

namespace ragdot::ep {

namespace {

Result<const NcclApi*> loaded_nccl() {
  std::string why;
  const NcclApi* api = nccl(&why);
  if (!api) return unavailable(why);
  return api;
}

CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

}  // namespace

Result<std::string> nccl_version() {
  RAGDOT_ASSIGN_OR_RETURN(const NcclApi* api, loaded_nccl());
  const int v = api->version;
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

Result<UniqueId> new_unique_id() {
  RAGDOT_ASSIGN_OR_RETURN(const NcclApi* api, loaded_nccl());
  ncclUniqueId raw;
  RAGDOT_RETURN_IF_ERROR(nccl_status(*api, api->ncclGetUniqueId(&raw), "ncclGetUniqueId"));
  UniqueId id;
  static_assert(sizeof(raw) == sizeof(id.bytes), "NCCL's unique id changed size");
  std::memcpy(id.bytes.data(), &raw, sizeof(raw));
  return id;
}

struct Communicator::State {
  const NcclApi* api = nullptr;
  const cuda::Device* device = nullptr;
  ncclComm_t comm = nullptr;
  int rank = 0, world = 1;
  std::int32_t* pinned = nullptr;  // plan()'s host copy of the counts
  std::size_t pinned_count = 0;

  ~State() {
    if (!device) return;
    cuda::ScopedContext ctx(device->context);
    if (comm) api->ncclCommDestroy(comm);
    if (pinned) cuda::driver()->cuMemFreeHost(pinned);
  }

  // p.to[d] goes to rank d, p.from[s] comes from rank s, piece by piece in order (NCCL matches a
  // pair's sends and receives in the order they are posted; both sides skip the same empty
  // pieces). This rank's own pieces are device copies.
  Status exchange(const Pieces& p, void* stream) const {
    RAGDOT_RETURN_IF_ERROR(check_own_piece(p, rank));
    cuda::ScopedContext ctx(device->context);
    RAGDOT_RETURN_IF_ERROR(ctx.status());
    const auto own_out = nonempty(p.to[std::size_t(rank)]), own_in = nonempty(p.from[std::size_t(rank)]);
    for (std::size_t i = 0; i < own_out.size(); ++i) {
      RAGDOT_CU_RETURN_IF_ERROR(cuda::driver()->cuMemcpyDtoDAsync(dptr(own_in[i].ptr), dptr(own_out[i].ptr),
                                                                  own_out[i].bytes, static_cast<CUstream>(stream)),
                                "cuMemcpyDtoDAsync");
    }
    if (world == 1) return Status::ok();
    auto st = static_cast<cudaStream_t>(stream);
    RAGDOT_RETURN_IF_ERROR(nccl_status(*api, api->ncclGroupStart(), "ncclGroupStart"));
    Status failed;
    for (int peer = 0; peer < world && failed.is_ok(); ++peer) {
      if (peer == rank) continue;
      for (const Piece& out : nonempty(p.to[std::size_t(peer)])) {
        if (!failed.is_ok()) break;
        failed = nccl_status(*api, api->ncclSend(out.ptr, out.bytes, ncclUint8, peer, comm, st), "ncclSend");
      }
      for (const Piece& in : nonempty(p.from[std::size_t(peer)])) {
        if (!failed.is_ok()) break;
        failed = nccl_status(*api, api->ncclRecv(const_cast<void*>(in.ptr), in.bytes, ncclUint8, peer, comm, st),
                             "ncclRecv");
      }
    }
    const Status ended = nccl_status(*api, api->ncclGroupEnd(), "ncclGroupEnd");  // always close the group
    RAGDOT_RETURN_IF_ERROR(failed);
    RAGDOT_RETURN_IF_ERROR(ended);
    ncclResult_t async = ncclSuccess;
    RAGDOT_RETURN_IF_ERROR(nccl_status(*api, api->ncclCommGetAsyncError(comm, &async), "ncclCommGetAsyncError"));
    return nccl_status(*api, async, "NCCL (asynchronous error)");
  }
};

Communicator::Communicator(std::unique_ptr<State> s) : s_(std::move(s)) {}
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;
Communicator::~Communicator() = default;

int Communicator::rank() const { return s_->rank; }
int Communicator::world_size() const { return s_->world; }
int Communicator::device() const { return s_->device->ordinal; }
void* Communicator::native_handle() const { return s_->comm; }

Result<Communicator> Communicator::create(const Bootstrap& b) {
  if (b.world_size < 1 || b.rank < 0 || b.rank >= b.world_size) {
    return invalid_argument("ep bootstrap: rank " + std::to_string(b.rank) + " of " + std::to_string(b.world_size) +
                            " ranks");
  }
  if (!b.id && b.id_file.empty()) return invalid_argument("ep bootstrap: neither a unique id nor an id file");
  auto s = std::make_unique<State>();
  RAGDOT_ASSIGN_OR_RETURN(s->api, loaded_nccl());
  std::string why;
  const int gpus = cuda::device_count(&why);
  if (gpus <= 0) return unavailable("expert parallelism needs a GPU: " + why);
  const int ordinal = b.device >= 0 ? b.device : b.rank % gpus;
  if (ordinal >= gpus) {
    return invalid_argument("ep bootstrap: GPU " + std::to_string(ordinal) + " asked for, " + std::to_string(gpus) +
                            " present");
  }
  RAGDOT_ASSIGN_OR_RETURN(s->device, cuda::device(ordinal));
  UniqueId id;
  if (b.id) {
    id = *b.id;
  } else if (b.rank == 0) {
    RAGDOT_ASSIGN_OR_RETURN(id, new_unique_id());
    RAGDOT_RETURN_IF_ERROR(write_unique_id_file(b.id_file, id));
  } else {
    RAGDOT_ASSIGN_OR_RETURN(id, read_unique_id_file(b.id_file, b.timeout_s));
  }
  ncclUniqueId raw;
  std::memcpy(&raw, id.bytes.data(), sizeof(raw));
  s->rank = b.rank;
  s->world = b.world_size;
  // NCCL takes its device from the calling thread's current context
  cuda::ScopedContext ctx(s->device->context);
  RAGDOT_RETURN_IF_ERROR(ctx.status());
  RAGDOT_RETURN_IF_ERROR(
      nccl_status(*s->api, s->api->ncclCommInitRank(&s->comm, b.world_size, raw, b.rank), "ncclCommInitRank"));
  return Communicator(std::move(s));
}

Status Communicator::exchange_counts(const void* counts, void* recv_counts, std::int64_t experts, void* stream) const {
  RAGDOT_RETURN_IF_ERROR(check_counts(counts, recv_counts, s_->world, experts, "exchange_counts"));
  return s_->exchange(count_pieces(counts, recv_counts, s_->world, experts), stream);
}

Result<ExchangePlan> Communicator::plan(const void* counts, const void* recv_counts, std::int64_t experts,
                                        void* stream, Layout layout) {
  RAGDOT_RETURN_IF_ERROR(check_counts(counts, recv_counts, s_->world, experts, "plan"));
  const auto* d = cuda::driver();
  cuda::ScopedContext ctx(s_->device->context);
  RAGDOT_RETURN_IF_ERROR(ctx.status());
  const std::size_t need = 2 * std::size_t(experts);
  if (s_->pinned_count < need) {
    if (s_->pinned) d->cuMemFreeHost(s_->pinned);
    s_->pinned = nullptr;
    s_->pinned_count = 0;
    void* p = nullptr;
    RAGDOT_CU_RETURN_IF_ERROR(d->cuMemHostAlloc(&p, need * sizeof(std::int32_t), 0), "cuMemHostAlloc");
    s_->pinned = static_cast<std::int32_t*>(p);
    s_->pinned_count = need;
  }
  const std::size_t bytes = std::size_t(experts) * sizeof(std::int32_t);
  auto st = static_cast<CUstream>(stream);
  RAGDOT_CU_RETURN_IF_ERROR(d->cuMemcpyDtoHAsync(s_->pinned, dptr(counts), bytes, st), "cuMemcpyDtoHAsync");
  RAGDOT_CU_RETURN_IF_ERROR(d->cuMemcpyDtoHAsync(s_->pinned + experts, dptr(recv_counts), bytes, st),
                            "cuMemcpyDtoHAsync");
  RAGDOT_CU_RETURN_IF_ERROR(d->cuStreamSynchronize(st), "cuStreamSynchronize");
  return ExchangePlan::from_counts(s_->pinned, s_->pinned + experts, s_->world, experts, layout);
}

Status Communicator::dispatch(const ExchangePlan& plan, const void* send, void* recv, std::int64_t row_bytes,
                              void* stream) const {
  RAGDOT_RETURN_IF_ERROR(check_plan(plan, s_->world, row_bytes, send, recv, "dispatch"));
  return s_->exchange(dispatch_pieces(plan, send, recv, row_bytes), stream);
}

Status Communicator::combine(const ExchangePlan& plan, const void* from, void* to, std::int64_t row_bytes,
                             void* stream) const {
  RAGDOT_RETURN_IF_ERROR(check_plan(plan, s_->world, row_bytes, to, from, "combine"));
  return s_->exchange(combine_pieces(plan, from, to, row_bytes), stream);
}

}  // namespace ragdot::ep
