// Progress of long commands on stderr, "[2/4] mixtral-8x7b up: padded ...", so that stdout
// carries only results.
#pragma once

#include <string>

namespace ragdot::cli {

class Progress {
 public:
  explicit Progress(int total_steps, bool quiet = false) : total_(total_steps), quiet_(quiet) {}
  // Starts the next step; the line stays open until done() or fail().
  void begin(const std::string& what);
  void done(const std::string& result);
  void fail(const std::string& why);
  void note(const std::string& message);  // a line of its own

 private:
  int total_;
  int step_ = 0;
  bool quiet_;
  bool open_ = false;
};

}  // namespace ragdot::cli
