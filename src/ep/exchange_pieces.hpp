// The byte ranges of one exchange, per rank, on the host: what a rank sends to every rank and
// where what it receives from every rank goes, in the order the sends and receives between two
// ranks are posted (NCCL matches them in that order). The NCCL communicator sends them
// (ep_communicator.cpp); a CPU test moves them with memcpy between ranks of one process to check
// the arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ragdot/ep_transport.hpp"

namespace ragdot::ep {

struct Piece {
  const void* ptr = nullptr;  // device memory in the communicator
  std::size_t bytes = 0;
};

struct Pieces {
  std::vector<std::vector<Piece>> to;    // [world][...]: sent to rank d, in order
  std::vector<std::vector<Piece>> from;  // [world][...]: received from rank s (written), in order
};

// The pieces that carry bytes: both sides of a pair skip the same empty ones.
std::vector<Piece> nonempty(const std::vector<Piece>& pieces);

// invalid_argument unless the plan is for `world` ranks, rows have bytes, the buffers the plan
// uses are there (`sender` holds the send layout, `receiver` the receive layout) and a kByExpert
// plan has its per-expert counts.
Status check_plan(const ExchangePlan& plan, int world, std::int64_t row_bytes, const void* sender,
                  const void* receiver, const char* what);
// invalid_argument unless `experts` split evenly over `world` ranks and both buffers are there.
Status check_counts(const void* counts, const void* recv_counts, int world, std::int64_t experts, const char* what);
// invalid_argument when what this rank keeps differs from what it expects from itself.
Status check_own_piece(const Pieces& p, int rank);

// counts [experts] int32 -> recv_counts [world, experts / world]: rank d gets counts of its experts.
Pieces count_pieces(const void* counts, void* recv_counts, int world, std::int64_t experts);
// Rows of the send layout to the receive layout, and back.
Pieces dispatch_pieces(const ExchangePlan& plan, const void* send, void* recv, std::int64_t row_bytes);
Pieces combine_pieces(const ExchangePlan& plan, const void* from, void* to, std::int64_t row_bytes);

}  // namespace ragdot::ep
