// What rlxrun shows while the ranks start: how many have joined the job's
// rendezvous, and at the start deadline which ranks never did.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "rlx/launcher/output.h"

namespace rlx::launcher {

class StartProgress {
 public:
  using Clock = std::chrono::steady_clock;

  // `hosts[r]` is where rank r runs; shown on `line` (one updating line on
  // a terminal, a line per change elsewhere).
  StartProgress(std::vector<std::string> hosts, std::chrono::milliseconds start_deadline,
                StatusLine& line);

  // Call often while starting: `connected` ranks have registered and
  // `missing` are those that have not. Returns false once there is nothing
  // more to show (everyone is in, or the deadline has been reported).
  bool update(int connected, const std::function<std::vector<int>()>& missing);

  // The job is ending: clear an updating line.
  void stop();

  // How long update() may wait before it wants to be called again.
  static constexpr std::chrono::milliseconds kRefresh{250};

 private:
  void show(const std::string& line, bool final);

  const std::vector<std::string> hosts_;
  const Clock::time_point start_ = Clock::now();
  const Clock::time_point deadline_;
  StatusLine& line_;
  bool active_ = true;
  bool shown_ = false;
  int last_connected_ = -1;
  Clock::time_point last_shown_{};
};

// "ranks 2, 5 (on node2)": rank numbers, with their hosts.
std::string describe_ranks(const std::vector<int>& ranks, const std::vector<std::string>& hosts);

}  // namespace rlx::launcher
