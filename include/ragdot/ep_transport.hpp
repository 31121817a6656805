// Expert parallelism across GPUs with NCCL: one process per GPU, the experts of an MoE layer split
// evenly over the ranks (rank r holds experts [r * E / world, (r + 1) * E / world)), and the rows
// of the (token, slot) pairs sent to their expert's rank and back.
//
// One forward step on each rank, everything on the caller's stream:
//
//   sort the pairs by expert (device)            -> rows [P, row], counts [E] int32 (device)
//   comm.exchange_counts(counts, recv_counts)    -> recv_counts [world, E / world] (device, no sync)
//   plan = comm.plan(counts, recv_counts, E, stream, Layout::kByExpert)
//                                                -> rows per rank and expert (one host sync, below)
//   comm.dispatch(plan, rows, received)          -> received [plan.recv_capacity, row], grouped by
//                                                   local expert (each expert's rows by source rank)
//   the local experts' ragged dots on `received`, group sizes plan.local_group_sizes (host values:
//   an async upload, or the column sums of recv_counts computed on the device)
//   comm.combine(plan, expert_out, back)         -> back [P, row] in the layout of `rows`
//
// Layout::kBySource instead receives one block per source rank (each by expert), with one send
// and one receive per pair of ranks instead of one per expert: fewer, larger messages, and the
// caller regroups by expert (recv_counts, on the device, are the sizes of the (rank, expert)
// blocks).
//
// The host sync. NCCL's send and receive take their sizes on the host, so sending exactly the
// rows each rank needs means reading the counts on the host once per step: plan() copies the
// rank's counts and the received counts to pinned memory and waits on the stream. Where that sync
// is not wanted (CUDA graphs, overlap), ExchangePlan::padded gives fixed slots instead: every rank
// sends `capacity` rows to every rank from a send buffer laid out [world, capacity, row] and
// receives [world, capacity, row]; the valid rows of each slot are the counts exchange_counts put
// on the device. More bytes on the wire, no host sync.
//
// NCCL is loaded at run time (libnccl.so.2, or RAGDOT_NCCL_LIBRARY), as are the CUDA driver and
// NVRTC: the library loads and its CPU backends run on machines without NCCL or a GPU, where these
// calls return an `unavailable` status. When NCCL_NVLS_ENABLE is unset, ragdot sets it to 0
// (NVLink multicast off) before NCCL first reads it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ragdot/status.hpp"

namespace ragdot::ep {

// NCCL's unique id, the token every rank of one communicator starts from.
struct UniqueId {
  std::array<unsigned char, 128> bytes{};
};

std::string to_hex(const UniqueId& id);                      // 256 hex digits
Result<UniqueId> unique_id_from_hex(std::string_view hex);   // invalid_argument on anything else
// A fresh id from ncclGetUniqueId (rank 0 makes it; needs NCCL, not a GPU).
Result<UniqueId> new_unique_id();
// Writes the id as hex to `path`, atomically (a temporary file renamed into place).
Status write_unique_id_file(const std::string& path, const UniqueId& id);
// Reads the id from `path`, waiting up to `timeout_s` seconds for the file to appear.
Result<UniqueId> read_unique_id_file(const std::string& path, double timeout_s);

// "NCCL 2.28.9" when NCCL loads here, else `unavailable` saying why.
Result<std::string> nccl_version();

// Who this process is among the ranks and how they meet.
struct Bootstrap {
  int rank = 0;
  int world_size = 1;
  int device = -1;              // GPU ordinal; -1: rank modulo the GPUs this process sees
  std::optional<UniqueId> id;   // the id itself; when absent, id_file is used
  std::string id_file;          // rank 0 writes a new id there, the other ranks wait for it
  double timeout_s = 300;       // how long the other ranks wait for id_file
};

// From the environment: RAGDOT_EP_RANK, RAGDOT_EP_WORLD_SIZE (required), RAGDOT_EP_DEVICE,
// RAGDOT_EP_ID (hex) or RAGDOT_EP_ID_FILE (one of them required), RAGDOT_EP_TIMEOUT (seconds).
Result<Bootstrap> bootstrap_from_env();

// How received rows are laid out: by source rank (each rank's block sorted by expert), or by local
// expert (each expert's block by source rank), ready for the local experts' ragged dots.
enum class Layout { kBySource, kByExpert };

// Rows each rank sends to and receives from every rank, and where they start (in rows) in the
// send and receive buffers; made by Communicator::plan (exact) or padded (fixed slots).
struct ExchangePlan {
  int world_size = 0;
  Layout layout = Layout::kBySource;
  std::vector<std::int64_t> send_rows, send_offsets;  // [world]: to rank d, from send_offsets[d]
  std::vector<std::int64_t> recv_rows, recv_offsets;  // [world]: from rank s (kBySource: at recv_offsets[s])
  std::int64_t send_capacity = 0;  // rows the send buffer must hold
  std::int64_t recv_capacity = 0;  // rows the receive buffer must hold
  // Exact plans only: rows this rank has per expert [experts], rows from each rank per local expert
  // [world, local], and rows per local expert over all ranks [local] (the group sizes of the local
  // experts' ragged dots in the kByExpert layout).
  std::vector<std::int64_t> counts, recv_counts, local_group_sizes;

  // From this rank's rows per expert, counts [experts] (host; the rows are sorted by expert, so
  // rank d's are contiguous), and the received counts [world, experts / world] (host).
  static Result<ExchangePlan> from_counts(const std::int32_t* counts, const std::int32_t* recv_counts, int world_size,
                                          std::int64_t experts, Layout layout = Layout::kBySource);
  // Fixed slots of `capacity` rows to and from every rank: buffers [world, capacity, row].
  static ExchangePlan padded(int world_size, std::int64_t capacity);
  std::string to_string() const;  // "ep plan world=2 by source send=[3,5] recv=[3,0]"
};

// One rank's NCCL communicator on its GPU. Move-only; destroying it destroys the communicator.
// Buffers are device pointers of this rank's GPU, `stream` a CUstream / cudaStream_t of that GPU
// (null: the legacy default stream). Calls enqueue work and return; only plan() waits.
class Communicator {
 public:
  // Makes the GPU's primary context current, gets the id (Bootstrap::id, or id_file: rank 0 writes
  // a new one) and calls ncclCommInitRank, which waits for every rank.
  static Result<Communicator> create(const Bootstrap& bootstrap);

  int rank() const;
  int world_size() const;
  int device() const;
  void* native_handle() const;  // the ncclComm_t

  // counts [experts] int32 (rows this rank has for each expert) -> recv_counts [world, experts /
  // world] int32 (rows rank s has for each of this rank's experts). Device to device, no sync.
  Status exchange_counts(const void* counts, void* recv_counts, std::int64_t experts, void* stream) const;
  // The exact plan from those two device arrays: one copy to pinned host memory and a wait on
  // `stream` (the host sync NCCL's host-side sizes need).
  Result<ExchangePlan> plan(const void* counts, const void* recv_counts, std::int64_t experts, void* stream,
                            Layout layout = Layout::kBySource);
  // send [plan.send_capacity rows] -> recv [plan.recv_capacity rows], rows of `row_bytes` bytes:
  // rank d gets send rows [send_offsets[d], + send_rows[d]), placed as plan.layout says (one send
  // and receive per pair of ranks, or per pair of ranks and expert for kByExpert).
  Status dispatch(const ExchangePlan& plan, const void* send, void* recv, std::int64_t row_bytes, void* stream) const;
  // The way back: rows of the receive layout (`from`, recv_capacity rows) to the send layout
  // (`to`, send_capacity rows), each row to where dispatch took it from.
  Status combine(const ExchangePlan& plan, const void* from, void* to, std::int64_t row_bytes, void* stream) const;

  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  ~Communicator();

 private:
  struct State;
  explicit Communicator(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace ragdot::ep
