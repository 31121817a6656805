// The one exception the program throws on purpose: the command line asks for something that can
// never work. main() turns it into a message and exit code 2; nothing else is thrown on bad input.
#pragma once

#include <stdexcept>
#include <string>

namespace ragdot::cli {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Exit codes shared by every command.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // a check failed, or the library returned an error
inline constexpr int kExitUsage = 2;    // bad flags or values

}  // namespace ragdot::cli
