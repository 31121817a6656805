#include "ep/exchange_pieces.hpp"

#include <string>

namespace ragdot::ep {

namespace {

// rows[r] rows of `row_bytes` from offsets[r], per rank
std::vector<Piece> rows_of(const void* base, const std::vector<std::int64_t>& offsets,
                           const std::vector<std::int64_t>& rows, std::int64_t row_bytes) {
  std::vector<Piece> out(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r) {
    out[r] = {static_cast<const char*>(base) + offsets[r] * row_bytes, std::size_t(rows[r] * row_bytes)};
  }
  return out;
}

}  // namespace

Status check_plan(const ExchangePlan& plan, int world, std::int64_t row_bytes, const void* sender,
                  const void* receiver, const char* what) {
  const auto w = std::size_t(world);
  if (plan.world_size != world || plan.send_rows.size() != w || plan.recv_rows.size() != w ||
      plan.send_offsets.size() != w || plan.recv_offsets.size() != w) {
    return invalid_argument(std::string(what) + ": a plan for " + std::to_string(plan.world_size) +
                            " ranks, the communicator has " + std::to_string(world));
  }
  if (row_bytes <= 0) return invalid_argument(std::string(what) + ": row_bytes must be positive");
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
  const std::size_t keeps = p.to[std::size_t(rank)].bytes, expects = p.from[std::size_t(rank)].bytes;
  if (keeps == expects) return Status::ok();
  return invalid_argument("ep exchange: this rank keeps " + std::to_string(keeps) + " bytes but expects " +
                          std::to_string(expects) + " from itself (a plan of another rank or another step?)");
}

Pieces count_pieces(const void* counts, void* recv_counts, int world, std::int64_t experts) {
  const std::size_t bytes = std::size_t(experts / world) * sizeof(std::int32_t);
  Pieces p;
  for (std::size_t r = 0; r < std::size_t(world); ++r) {
    p.to.push_back({static_cast<const char*>(counts) + r * bytes, bytes});        // rank r's experts
    p.from.push_back({static_cast<const char*>(recv_counts) + r * bytes, bytes});  // row r of [world, local]
  }
  return p;
}

Pieces dispatch_pieces(const ExchangePlan& plan, const void* send, void* recv, std::int64_t row_bytes) {
  return {rows_of(send, plan.send_offsets, plan.send_rows, row_bytes),
          rows_of(recv, plan.recv_offsets, plan.recv_rows, row_bytes)};
}

Pieces combine_pieces(const ExchangePlan& plan, const void* from, void* to, std::int64_t row_bytes) {
  return {rows_of(from, plan.recv_offsets, plan.recv_rows, row_bytes),
          rows_of(to, plan.send_offsets, plan.send_rows, row_bytes)};
}

}  // namespace ragdot::ep
