#include "ep/exchange_pieces.hpp"

#include <cstdint>
#include <limits>
#include <string>

namespace ragdot::ep {

namespace {

Piece rows_at(const void* base, std::int64_t row, std::int64_t rows, std::int64_t row_bytes) {
  return {static_cast<const char*>(base) + row * row_bytes, std::size_t(rows * row_bytes)};
}

// One piece per rank: rows[r] rows from offsets[r].
std::vector<std::vector<Piece>> blocks(const void* base, const std::vector<std::int64_t>& offsets,
                                       const std::vector<std::int64_t>& rows, std::int64_t row_bytes) {
  std::vector<std::vector<Piece>> out(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r) out[r] = {rows_at(base, offsets[r], rows[r], row_bytes)};
  return out;
}

// kByExpert, the sender's side: to rank d one piece per expert of d, in expert order (the send
// buffer is sorted by expert, so they follow each other from send_offsets[d]).
std::vector<std::vector<Piece>> expert_sends(const ExchangePlan& plan, const void* base, std::int64_t row_bytes) {
  const std::size_t world = std::size_t(plan.world_size), local = plan.counts.size() / world;
  std::vector<std::vector<Piece>> out(world);
  for (std::size_t d = 0; d < world; ++d) {
    std::int64_t row = plan.send_offsets[d];
    for (std::size_t l = 0; l < local; ++l) {
      const std::int64_t n = plan.counts[d * local + l];
      out[d].push_back(rows_at(base, row, n, row_bytes));
      row += n;
    }
  }
  return out;
}

// kByExpert, the receiver's side: from rank s one piece per local expert, each at its place in
// that expert's block (experts one after the other, each expert's rows by source rank).
std::vector<std::vector<Piece>> expert_receives(const ExchangePlan& plan, const void* base, std::int64_t row_bytes) {
  const std::size_t world = std::size_t(plan.world_size), local = plan.local_group_sizes.size();
  std::vector<std::vector<Piece>> out(world);
  std::int64_t expert_start = 0;
  for (std::size_t l = 0; l < local; ++l) {
    std::int64_t row = expert_start;
    for (std::size_t s = 0; s < world; ++s) {
      const std::int64_t n = plan.recv_counts[s * local + l];
      out[s].push_back(rows_at(base, row, n, row_bytes));
      row += n;
    }
    expert_start += plan.local_group_sizes[l];
  }
  return out;
}

std::vector<std::vector<Piece>> send_side(const ExchangePlan& plan, const void* base, std::int64_t row_bytes) {
  if (plan.layout == Layout::kByExpert) return expert_sends(plan, base, row_bytes);
  return blocks(base, plan.send_offsets, plan.send_rows, row_bytes);
}

std::vector<std::vector<Piece>> receive_side(const ExchangePlan& plan, const void* base, std::int64_t row_bytes) {
  if (plan.layout == Layout::kByExpert) return expert_receives(plan, base, row_bytes);
  return blocks(base, plan.recv_offsets, plan.recv_rows, row_bytes);
}

}  // namespace

std::vector<Piece> nonempty(const std::vector<Piece>& pieces) {
  std::vector<Piece> out;
  for (const Piece& p : pieces) {
    if (p.bytes > 0) out.push_back(p);
  }
  return out;
}

Status check_plan(const ExchangePlan& plan, int world, std::int64_t row_bytes, const void* sender,
                  const void* receiver, const char* what) {
  const auto w = std::size_t(world);
  if (plan.world_size != world || plan.send_rows.size() != w || plan.recv_rows.size() != w ||
      plan.send_offsets.size() != w || plan.recv_offsets.size() != w) {
    return invalid_argument(std::string(what) + ": a plan for " + std::to_string(plan.world_size) +
                            " ranks, the communicator has " + std::to_string(world));
  }
  if (row_bytes <= 0) return invalid_argument(std::string(what) + ": row_bytes must be positive");
  // every byte count the exchange computes (capacity x row_bytes) fits in int64
  const std::int64_t byte_limit = std::numeric_limits<std::int64_t>::max() / 2;
  if (plan.send_capacity < 0 || plan.recv_capacity < 0 || plan.send_capacity > byte_limit / row_bytes ||
      plan.recv_capacity > byte_limit / row_bytes) {
    return invalid_argument(std::string(what) + ": capacities of " + std::to_string(plan.send_capacity) + " and " +
                            std::to_string(plan.recv_capacity) + " rows of " + std::to_string(row_bytes) + " bytes");
  }
  for (std::size_t r = 0; r < w; ++r) {
    if (plan.send_rows[r] < 0 || plan.recv_rows[r] < 0 || plan.send_offsets[r] < 0 || plan.recv_offsets[r] < 0) {
      return invalid_argument(std::string(what) + ": a negative row count or offset for rank " + std::to_string(r));
    }
    // each rank's rows lie inside the buffers (compared so that the sums cannot overflow)
    if (plan.send_offsets[r] > plan.send_capacity || plan.send_rows[r] > plan.send_capacity - plan.send_offsets[r] ||
        plan.recv_offsets[r] > plan.recv_capacity || plan.recv_rows[r] > plan.recv_capacity - plan.recv_offsets[r]) {
      return invalid_argument(std::string(what) + ": rank " + std::to_string(r) + "'s rows run past the send or " +
                              "receive capacity (" + std::to_string(plan.send_capacity) + ", " +
                              std::to_string(plan.recv_capacity) + " rows)");
    }
  }
  if (plan.layout == Layout::kByExpert) {
    const std::size_t local = plan.local_group_sizes.size();
    if (local == 0 || plan.counts.size() != w * local || plan.recv_counts.size() != w * local) {
      return invalid_argument(std::string(what) + ": a by-expert plan needs the per-expert counts of an exact plan");
    }
    // the per-expert counts place rows inside the buffers too
    std::int64_t sent = 0, received = 0;
    for (std::size_t i = 0; i < w * local; ++i) {
      if (plan.counts[i] < 0 || plan.recv_counts[i] < 0 ||
          plan.counts[i] > plan.send_capacity - sent || plan.recv_counts[i] > plan.recv_capacity - received) {
        return invalid_argument(std::string(what) + ": the per-expert counts are negative or exceed the capacities");
      }
      sent += plan.counts[i];
      received += plan.recv_counts[i];
    }
  }
  if ((plan.send_capacity > 0 && !sender) || (plan.recv_capacity > 0 && !receiver)) {
    return invalid_argument(std::string(what) + ": a null device buffer");
  }
  return Status::ok();
}

Status check_counts(const void* counts, const void* recv_counts, int world, std::int64_t experts, const char* what) {
  if (experts < 1 || experts % world) {
    return invalid_argument(std::string(what) + ": " + std::to_string(experts) + " experts do not split evenly over " +
                            std::to_string(world) + " ranks");
  }
  if (!counts || !recv_counts) return invalid_argument(std::string(what) + ": a null device buffer");
  return Status::ok();
}

Status check_own_piece(const Pieces& p, int rank) {
  const auto keeps = nonempty(p.to[std::size_t(rank)]), expects = nonempty(p.from[std::size_t(rank)]);
  bool same = keeps.size() == expects.size();
  for (std::size_t i = 0; same && i < keeps.size(); ++i) same = keeps[i].bytes == expects[i].bytes;
  if (same) return Status::ok();
  return invalid_argument("ep exchange: what this rank keeps differs from what it expects from itself (" +
                          std::to_string(keeps.size()) + " and " + std::to_string(expects.size()) +
                          " pieces; a plan of another rank or another step?)");
}

Pieces count_pieces(const void* counts, void* recv_counts, int world, std::int64_t experts) {
  const std::int64_t local = experts / world;
  Pieces p;
  for (std::int64_t r = 0; r < world; ++r) {
    p.to.push_back({rows_at(counts, r * local, local, sizeof(std::int32_t))});        // rank r's experts
    p.from.push_back({rows_at(recv_counts, r * local, local, sizeof(std::int32_t))});  // row r of [world, local]
  }
  return p;
}

Pieces dispatch_pieces(const ExchangePlan& plan, const void* send, void* recv, std::int64_t row_bytes) {
  return {send_side(plan, send, row_bytes), receive_side(plan, recv, row_bytes)};
}

Pieces combine_pieces(const ExchangePlan& plan, const void* from, void* to, std::int64_t row_bytes) {
  return {receive_side(plan, from, row_bytes), send_side(plan, to, row_bytes)};
}

}  // namespace ragdot::ep
