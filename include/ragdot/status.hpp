// Errors as values: every fallible call returns a Status or a Result<T>.
// The library never calls exit() or aborts on user input.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace ragdot {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller passed something that can never be valid
  kUnsupported,       // valid, but this backend/variant does not take it
  kUnavailable,       // a backend, device or library is not present here
  kResourceExhausted, // out of memory, workspace too small
  kCompileError,      // run-time kernel compilation failed
  kInternal,          // a bug in ragdot or a driver failure
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: <message>"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status compile_error(std::string m) { return {StatusCode::kCompileError, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// A value or the Status that explains why there is none.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).is_ok()) v_ = Status(StatusCode::kInternal, "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &std::get<T>(v_); }
  const T* operator->() const { return &std::get<T>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace ragdot

#define RAGDOT_CONCAT_INNER_(a, b) a##b
#define RAGDOT_CONCAT_(a, b) RAGDOT_CONCAT_INNER_(a, b)

#define RAGDOT_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::ragdot::Status ragdot_status_ = (expr);        \
    if (!ragdot_status_.is_ok()) return ragdot_status_; \
  } while (0)

#define RAGDOT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

#define RAGDOT_ASSIGN_OR_RETURN(lhs, expr) \
  RAGDOT_ASSIGN_OR_RETURN_IMPL_(RAGDOT_CONCAT_(ragdot_result_, __LINE__), lhs, expr)
