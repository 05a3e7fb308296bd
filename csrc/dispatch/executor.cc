#include "dispatch/executor.h"

namespace tp {

ExecutorTable& ExecutorTable::instance() {
  static ExecutorTable table;
  return table;
}

void ExecutorTable::add(const std::string& variant, const std::string& backend, std::unique_ptr<Executor> e) {
  executors_[{variant, backend}] = std::move(e);
}

const Executor* ExecutorTable::find(const std::string& variant, const std::string& backend) const {
  auto it = executors_.find({variant, backend});
  return it == executors_.end() ? nullptr : it->second.get();
}

}  // namespace tp
