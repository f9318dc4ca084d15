#include "rlx/core/registry.h"

#include <iostream>
#include <map>
#include <mutex>
#include <utility>

#include "rlx/core/error.h"

namespace rlx {
namespace {

// Name -> entry, shared by the two registries. `what` names the registry in
// messages.
template <class Entry>
class Registry {
 public:
  explicit Registry(std::string_view what) : what_(what) {}

  void add(std::string name, Entry entry) {
    auto shared = std::make_shared<const Entry>(std::move(entry));
    std::lock_guard lock(mutex_);
    auto [it, inserted] = entries_.try_emplace(std::move(name), shared);
    if (!inserted) {
      std::cerr << "rlx: warning: replacing the " << what_ << " registered as '" << it->first
                << "'\n";
      it->second = std::move(shared);
    }
  }

  std::shared_ptr<const Entry> find(std::string_view name) const {
    std::lock_guard lock(mutex_);
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      throw Error("unknown op '" + std::string(name) + "': no " + std::string(what_) +
                  " is registered under that name");
    }
    return it->second;
  }

 private:
  std::string_view what_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const Entry>, std::less<>> entries_;
};

Registry<OpExtension>& extensions() {
  static Registry<OpExtension> registry("op extension");
  return registry;
}

Registry<ArrayKernel>& kernels() {
  static Registry<ArrayKernel> registry("array kernel");
  return registry;
}

}  // namespace

void register_op_extension(OpExtension extension) {
  if (extension.name.empty()) throw Error("register_op_extension: the op needs a name");
  if (!extension.infer_shape) {
    throw Error("register_op_extension: '" + extension.name + "' has no infer_shape");
  }
  std::string name = extension.name;
  extensions().add(std::move(name), std::move(extension));
}

std::shared_ptr<const OpExtension> find_op_extension(std::string_view name) {
  return extensions().find(name);
}

void register_array_kernel(std::string name, ArrayKernel kernel) {
  if (name.empty()) throw Error("register_array_kernel: the op needs a name");
  if (!kernel) throw Error("register_array_kernel: '" + name + "' has no kernel");
  kernels().add(std::move(name), std::move(kernel));
}

std::shared_ptr<const ArrayKernel> find_array_kernel(std::string_view name) {
  return kernels().find(name);
}

Array custom_op(std::string_view name, const std::vector<Array>& inputs, std::string_view attrs) {
  const auto kernel = find_array_kernel(name);
  Array result = (*kernel)(inputs, attrs);
  if (!result.valid())
    throw Error(std::string(name) + ": the array kernel returned an empty Array");
  return result;
}

}  // namespace rlx
