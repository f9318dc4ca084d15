#include "rlx/launcher/record_analysis.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "rlx/launcher/options.h"  // kMaxRanks
#include "rlx/transport/hostfile_reader.h"
#include "rlx/transport/launch_env.h"  // excerpt()

namespace rlx::launcher {
namespace {

// Dumps are files rlx wrote, but a directory anyone can write to is read
// with the bounds of any file a user points rlx at.
constexpr std::chrono::milliseconds kReadTimeout{2000};
constexpr std::size_t kListedRanks = 8;
// Ranks behind in one group named one by one; the rest are counted.
constexpr std::size_t kLinesPerGroup = 16;

RecordedEntry entry_from(const nlohmann::json& j) {
  RecordedEntry e;
  e.group = j.at("group").get<std::uint64_t>();
  e.call = j.at("call").get<std::string>();
  e.sequence = j.at("sequence").get<std::uint64_t>();
  e.count = j.value("count", std::uint64_t{0});
  e.dtype = j.value("dtype", std::string());
  e.op = j.value("op", std::string());
  e.peer = j.value("peer", -1);
  e.tag = j.value("tag", std::int64_t{-1});
  e.state = j.at("state").get<std::string>();
  e.error = j.value("error", std::string());
  e.start_ns = j.value("start_ns", std::uint64_t{0});
  return e;
}

RankRecord record_from(const nlohmann::json& j) {
  RankRecord r;
  r.rank = j.at("rank").get<int>();
  r.world_size = j.value("world_size", 0);
  r.host = j.value("host", std::string());
  r.pid = j.value("pid", 0LL);
  r.reason = j.value("reason", std::string());
  r.now_ns = j.value("now_ns", std::uint64_t{0});
  r.now_unix_ns = j.value("now_unix_ns", std::uint64_t{0});
  r.overwritten_calls = j.value("overwritten_calls", std::uint64_t{0});
  for (const auto& g : j.at("groups")) {
    r.groups.push_back({g.at("id").get<std::uint64_t>(), g.at("label").get<std::string>(),
                        g.value("rank", -1), g.at("world_ranks").get<std::vector<int>>()});
  }
  for (const auto& c : j.at("calls")) r.calls.push_back(entry_from(c));
  return r;
}

std::string list_ranks(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size() && i < kListedRanks; ++i) {
    text += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  }
  if (ranks.size() > kListedRanks) text += ", ... (" + std::to_string(ranks.size()) + " ranks)";
  return text;
}

const char* verb_for(const std::string& state, bool plural) {
  if (state == "running") return plural ? "wait in" : "waits in";
  if (state == "failed") return "failed in";
  return "finished";
}

// One rank's dump, indexed: its groups' labels, and per label its newest
// collective (by its number in the group, whatever thread ran it).
struct RankView {
  const RankRecord* record = nullptr;
  std::map<std::uint64_t, std::string> labels;
  std::map<std::string, const RecordedEntry*> newest;

  std::string label_of(std::uint64_t id) const {
    auto it = labels.find(id);
    return it != labels.end() ? it->second : "#" + std::to_string(id);
  }
};

// A group by label: its members (world ranks, as the first dump naming it
// says; the world group's from group 0).
using Members = std::map<std::string, std::vector<int>>;

std::vector<int> valid_members(const std::vector<int>& ranks, int world_size) {
  std::vector<int> kept;
  std::set<int> seen;
  for (int r : ranks) {
    if (r >= 0 && r < world_size && seen.insert(r).second) kept.push_back(r);
  }
  return kept;
}

// What `view`'s rank is doing now: its newest call still running.
std::string now_doing(const RankView& view) {
  const RankRecord& record = *view.record;
  for (auto it = record.calls.rbegin(); it != record.calls.rend(); ++it) {
    if (it->state != "running") continue;
    std::string text = "is now in " + it->shape() +
                       (it->is_collective() ? " #" + std::to_string(it->sequence) : "") +
                       " of group " + view.label_of(it->group);
    if (record.now_ns > it->start_ns && it->start_ns > 0) {
      const auto tenths = (record.now_ns - it->start_ns) / 100'000'000;
      text += " (for " + std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " s)";
    }
    return text;
  }
  // Waiting on a posted isend or irecv is not recorded (Request::wait is not a call).
  if (!record.calls.empty() && record.calls.back().state == "posted") {
    return "is in no rlx call (waiting on its " + record.calls.back().shape() +
           ", computing, sleeping, or stuck outside rlx)";
  }
  return "is in no rlx call (computing, sleeping, or stuck outside rlx)";
}

std::string describe_last(const RecordedEntry* last, const RankRecord& record) {
  if (last == nullptr) {
    return record.overwritten_calls > 0
               ? "its record no longer holds a call of this group (older calls were overwritten)"
               : "it made no collective call in this group before";
  }
  const std::string call = last->shape() + " #" + std::to_string(last->sequence);
  if (last->state == "failed") return "its " + call + " failed: " + last->error;
  if (last->state == "running") return "it is still in " + call;
  return "it last finished " + call;
}

// The ranks at a group's newest call, by their state in it: "ranks 0, 2
// wait in", "rank 1 finished".
std::vector<std::string> by_state(const std::vector<int>& ranks,
                                  const std::map<int, const RecordedEntry*>& last) {
  std::map<std::string, std::vector<int>> states;
  for (int r : ranks) states[last.at(r)->state].push_back(r);
  std::vector<std::string> parts;
  for (const auto& [state, members] : states) {
    parts.push_back(list_ranks(members) + " " + verb_for(state, members.size() > 1));
  }
  return parts;
}

std::string joined(const std::vector<std::string>& parts, const std::string& separator) {
  std::string text;
  for (const auto& part : parts) text += (text.empty() ? "" : separator) + part;
  return text;
}

void analyze_group(const std::string& label, const std::vector<int>& members,
                   const std::map<int, RankView>& views, const std::set<int>& missing_matters,
                   std::vector<std::string>& findings) {
  std::vector<int> present, missing;
  for (int m : members) {
    if (views.contains(m)) {
      present.push_back(m);
    } else if (missing_matters.contains(m)) {
      missing.push_back(m);
    }
  }
  std::map<int, const RecordedEntry*> last;
  std::optional<std::uint64_t> top;
  for (int m : present) {
    const auto& newest = views.at(m).newest;
    auto it = newest.find(label);
    last[m] = it == newest.end() ? nullptr : it->second;
    if (last[m] && (!top || last[m]->sequence > *top)) top = last[m]->sequence;
  }
  if (!top) return;
  std::vector<int> at_top, behind;
  for (int m : present) (last[m] && last[m]->sequence == *top ? at_top : behind).push_back(m);
  const RecordedEntry& reference = *last[at_top.front()];
  const std::string top_call =
      reference.shape() + " #" + std::to_string(*top) + " of group " + label;
  const auto states = by_state(at_top, last);
  for (std::size_t i = 0; i < behind.size() && i < kLinesPerGroup; ++i) {
    const RankView& view = views.at(behind[i]);
    findings.push_back("rank " + std::to_string(behind[i]) + " never entered " + top_call +
                       ", which " + joined(states, " and ") + "; " +
                       describe_last(last[behind[i]], *view.record) + ", and " + now_doing(view));
  }
  if (behind.size() > kLinesPerGroup) {
    findings.push_back("... and " + std::to_string(behind.size() - kLinesPerGroup) +
                       " more ranks never entered " + top_call);
  }
  if (!behind.empty()) return;
  std::map<std::string, std::vector<int>> shapes;
  for (int m : at_top) shapes[last[m]->shape()].push_back(m);
  if (shapes.size() > 1) {
    // The most ranks' call first: the others are the likelier culprits.
    std::vector<std::pair<std::string, std::vector<int>>> sides(shapes.begin(), shapes.end());
    std::stable_sort(sides.begin(), sides.end(), [](const auto& a, const auto& b) {
      return a.second.size() > b.second.size();
    });
    std::string line =
        "ranks disagree on call #" + std::to_string(*top) + " of group " + label + ":";
    std::string separator = " ";
    for (const auto& [shape, ranks] : sides) {
      line += separator + list_ranks(ranks) + " called " + shape;
      separator = "; ";
    }
    findings.push_back(line);
    return;
  }
  const auto failed =
      std::find_if(at_top.begin(), at_top.end(), [&](int m) { return last[m]->state == "failed"; });
  const std::string cause = failed != at_top.end() ? ": " + last[*failed]->error : "";
  const bool unfinished =
      std::any_of(at_top.begin(), at_top.end(), [&](int m) { return last[m]->state != "done"; });
  const std::string at_top_call = states.size() == 1
                                      ? states.front() + " " + top_call
                                      : top_call + " (" + joined(states, " it; ") + " it)";
  if (!missing.empty()) {
    findings.push_back(list_ranks(missing) + " left no record (killed, or stopped before it " +
                       "could write one); " + at_top_call + cause);
  } else if (unfinished) {
    findings.push_back("every rank of group " + label + " entered " + top_call + "; " +
                       joined(states, " it; ") + " it" + cause);
  }
}

}  // namespace

std::string RecordedEntry::shape() const {
  if (!is_collective()) {
    return call + (call == "send" || call == "isend" ? " to" : " from") + " rank " +
           std::to_string(peer) + " (tag " + std::to_string(tag) + ")";
  }
  std::string text = call;
  if (!op.empty()) text += " " + op;
  if (call != "barrier") text += " of " + std::to_string(count) + " x " + dtype;
  if (peer >= 0) text += " from root " + std::to_string(peer);
  return text;
}

std::vector<RankRecord> read_records(const std::string& dir, std::vector<std::string>& problems) {
  std::vector<RankRecord> records;
  std::error_code error;
  std::vector<std::filesystem::path> files;
  std::filesystem::directory_iterator it(dir, error);
  for (; !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with("rank-") || !name.ends_with(".json")) continue;
    // Dumps are regular files (renamed into place): a FIFO or device is
    // named, never opened, so that a status view never waits on one.
    std::error_code kind_error;
    if (!std::filesystem::is_regular_file(it->symlink_status(kind_error))) {
      problems.push_back(it->path().string() + ": not a dump rlx can read: not a regular file");
      continue;
    }
    if (files.size() == static_cast<std::size_t>(kMaxRanks)) {
      problems.push_back(dir + ": more than " + std::to_string(kMaxRanks) +
                         " dumps; the rest are not read");
      break;
    }
    files.push_back(it->path());
  }
  if (error) problems.push_back(dir + ": " + error.message());
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    try {
      const auto text = hostfile::read_text(path.string(), kReadTimeout, "record dump");
      records.push_back(record_from(hostfile::parse_json(text, path.string())));
    } catch (const std::exception& e) {
      problems.push_back(path.string() + ": not a dump rlx can read: " + excerpt(e.what(), 200));
    }
  }
  return records;
}

std::vector<std::string> describe_progress(const std::vector<RankRecord>& records) {
  std::map<std::string, std::vector<int>> doing;
  std::set<int> seen;
  for (const auto& r : records) {
    if (r.rank < 0 || !seen.insert(r.rank).second) continue;
    RankView view{.record = &r};
    for (const auto& g : r.groups) view.labels[g.id] = g.label;
    const auto running = std::find_if(r.calls.rbegin(), r.calls.rend(),
                                      [](const RecordedEntry& e) { return e.state == "running"; });
    std::string text;
    if (running != r.calls.rend()) {
      text = "in " + running->shape() +
             (running->is_collective() ? " #" + std::to_string(running->sequence) : "") +
             " of group " + view.label_of(running->group);
    } else if (!r.calls.empty()) {
      const RecordedEntry& last = r.calls.back();
      text = "in no rlx call; the last one, " + last.shape() +
             (last.is_collective() ? " #" + std::to_string(last.sequence) : "") + " of group " +
             view.label_of(last.group) + ", " +
             (last.state == "done"     ? std::string("finished")
              : last.state == "posted" ? std::string("posted (it may be waiting on it)")
                                       : last.state);
    } else {
      text = "has made no rlx call yet";
    }
    doing[text].push_back(r.rank);
  }
  std::vector<std::string> lines;
  for (const auto& [text, ranks] : doing) lines.push_back(list_ranks(ranks) + ": " + text);
  return lines;
}

std::vector<std::string> find_culprits(const std::vector<RankRecord>& records, int world_size,
                                       const std::set<int>* missing_matters) {
  if (world_size <= 0) {
    for (const auto& r : records) world_size = std::max({world_size, r.world_size, r.rank + 1});
  }
  world_size = std::min(world_size, kMaxRanks);
  std::map<int, RankView> views;
  for (const auto& r : records) {
    if (r.rank < 0 || r.rank >= world_size || views.contains(r.rank)) continue;
    RankView& view = views[r.rank];
    view.record = &r;
    for (const auto& g : r.groups) view.labels[g.id] = g.label;
    for (const auto& e : r.calls) {
      if (!e.is_collective()) continue;
      const RecordedEntry*& newest = view.newest[view.label_of(e.group)];
      if (newest == nullptr || e.sequence >= newest->sequence) newest = &e;
    }
  }
  if (views.empty()) return {};
  std::set<int> every_rank;
  for (int r = 0; r < world_size; ++r) every_rank.insert(r);
  const std::set<int>& matters = missing_matters != nullptr ? *missing_matters : every_rank;
  // Members by label: the world's are every rank; a split's, the first dump
  // that names it.
  Members members;
  members["world"] = std::vector<int>(every_rank.begin(), every_rank.end());
  for (const auto& [rank, view] : views) {
    for (const auto& g : view.record->groups) {
      if (!members.contains(g.label)) members[g.label] = valid_members(g.world_ranks, world_size);
    }
  }
  std::vector<std::string> findings;
  analyze_group("world", members["world"], views, matters, findings);
  for (const auto& [label, ranks] : members) {
    if (label != "world") analyze_group(label, ranks, views, matters, findings);
  }
  return findings;
}

}  // namespace rlx::launcher
