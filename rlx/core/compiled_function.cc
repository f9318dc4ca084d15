#include "rlx/core/compiled_function.h"

#include <algorithm>

#include "rlx/core/error.h"

namespace rlx {
namespace {

bool fits(const std::vector<InputSpec>& key, std::span<const Array> inputs) {
  if (key.size() != inputs.size()) return false;
  for (std::size_t i = 0; i < key.size(); ++i) {
    if (key[i].dtype != inputs[i].dtype() || key[i].shape != inputs[i].shape()) return false;
  }
  return true;
}

}  // namespace

CompiledFunction::CompiledFunction(Builder build) : build_(std::move(build)) {
  if (!build_) throw Error("CompiledFunction: needs a function that builds the graph");
}

void CompiledFunction::set_param(std::string name, Array value) {
  // All or nothing: a value that one compiled shape refuses leaves every
  // shape with the value it had.
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    try {
      entries_[i]->graph.set_param(name, value);
    } catch (...) {
      auto old = std::find_if(params_.begin(), params_.end(),
                              [&](const auto& param) { return param.first == name; });
      if (old != params_.end()) {
        for (std::size_t j = 0; j < i; ++j) entries_[j]->graph.set_param(name, old->second);
      }
      throw;
    }
  }
  auto it = std::find_if(params_.begin(), params_.end(),
                         [&](const auto& param) { return param.first == name; });
  if (it == params_.end()) {
    params_.emplace_back(std::move(name), std::move(value));
  } else {
    it->second = std::move(value);
  }
}

CompiledFunction::Entry& CompiledFunction::compile_for(std::span<const Array> inputs) {
  std::vector<InputSpec> key;
  for (const Array& input : inputs) {
    if (!input.valid()) throw Error("CompiledFunction::run: an empty rlx::Array among the inputs");
    key.push_back({input.shape(), input.dtype()});
  }
  const Graph graph = build_(key);
  auto entry = std::make_unique<Entry>(Entry{std::move(key), compile(graph), {}});
  if (entry->graph.input_names().size() != inputs.size()) {
    throw Error("CompiledFunction::run: got " + std::to_string(inputs.size()) +
                " inputs where the graph built for them takes " +
                std::to_string(entry->graph.input_names().size()));
  }
  for (const auto& [name, value] : params_) entry->graph.set_param(name, value);
  entry->values.assign(inputs.begin(), inputs.end());
  entries_.push_back(std::move(entry));
  return *entries_.back();
}

CompiledFunction::Entry& CompiledFunction::entry_for(std::span<const Array> inputs) {
  if (last_ && fits(last_->key, inputs)) return *last_;
  for (const auto& entry : entries_) {
    if (fits(entry->key, inputs)) return *entry;
  }
  return compile_for(inputs);
}

std::span<const Array> CompiledFunction::run(std::span<const Array> inputs) {
  Entry& entry = entry_for(inputs);
  last_ = &entry;
  for (std::size_t i = 0; i < inputs.size(); ++i) entry.values[i] = Value(inputs[i]);
  return entry.graph.run_slots(entry.values);
}

}  // namespace rlx
