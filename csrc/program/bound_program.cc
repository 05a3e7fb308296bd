#include "program/bound_program.h"

#include <map>

#include "errors.h"

namespace tp {

namespace {
std::map<std::string, ProgramBinder>& binders() {
  static auto* table = new std::map<std::string, ProgramBinder>();  // outlives every static that runs programs
  return *table;
}
}  // namespace

void add_program_executor(const std::string& backend, ProgramBinder bind) { binders()[backend] = bind; }

const ProgramRunner& BoundProgram::runner() const {
  return runner_.get([&] {
    const auto found = binders().find(plan_->context.backend);
    if (found == binders().end()) throw ValueError("backend: no " + plan_->context.backend + " runner of programs");
    return found->second(plan_);
  });
}

}  // namespace tp
