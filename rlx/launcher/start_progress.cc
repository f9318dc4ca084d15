#include "rlx/launcher/start_progress.h"

#include <cstdio>
#include <map>

namespace rlx::launcher {
namespace {

// A start shorter than this shows nothing: quick jobs stay quiet.
constexpr auto kQuiet = std::chrono::seconds(1);

std::string seconds_since(StartProgress::Clock::time_point start) {
  const auto elapsed = std::chrono::duration<double>(StartProgress::Clock::now() - start).count();
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", elapsed);
  return text;
}

}  // namespace

std::string describe_ranks(const std::vector<int>& ranks, const std::vector<std::string>& hosts) {
  std::map<std::string, std::string> by_host;
  std::vector<std::string> order;
  for (int r : ranks) {
    const std::string& host = hosts[static_cast<std::size_t>(r)];
    if (!by_host.contains(host)) order.push_back(host);
    std::string& list = by_host[host];
    list += (list.empty() ? "" : ", ") + std::to_string(r);
  }
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < order.size(); ++i) {
    out += (i == 0 ? "" : "; ") + by_host[order[i]] + " (on " + order[i] + ")";
  }
  return out;
}

StartProgress::StartProgress(std::vector<std::string> hosts,
                             std::chrono::milliseconds start_deadline, StatusLine& line)
    : hosts_(std::move(hosts)), deadline_(start_ + start_deadline), line_(line) {}

bool StartProgress::update(int connected, const std::function<std::vector<int>()>& missing) {
  if (!active_) return false;
  const int total = static_cast<int>(hosts_.size());
  const auto now = Clock::now();
  if (connected >= total) {
    if (shown_) {
      show("all " + std::to_string(total) + " ranks connected in " + seconds_since(start_), true);
    }
    active_ = false;
  } else if (now >= deadline_) {
    show(describe_ranks(missing(), hosts_) + " did not join the job's rendezvous within " +
             seconds_since(start_) + " (" + std::to_string(connected) + " of " +
             std::to_string(total) +
             " did); their own output, and the host's ssh, say why. "
             "Programs that never call rlx::init never join.",
         true);
    active_ = false;
  } else if (now - start_ >= kQuiet &&
             (connected != last_connected_ ||
              (line_.on_terminal() && now - last_shown_ >= kQuiet) ||
              // rank output cleared it
              (line_.on_terminal() && shown_ && !line_.shown() && now - last_shown_ >= kRefresh))) {
    show(std::to_string(connected) + " of " + std::to_string(total) + " ranks connected (" +
             seconds_since(start_) + ")",
         false);
    last_connected_ = connected;
    last_shown_ = now;
  }
  return active_;
}

void StartProgress::stop() {
  if (active_) line_.clear();
  active_ = false;
}

void StartProgress::show(const std::string& text, bool final) {
  shown_ = true;
  if (final) {
    line_.finish("rlxrun: " + text);
  } else {
    line_.show("rlxrun: " + text);
  }
}

}  // namespace rlx::launcher
