// How the generated source declares a register placement for the device templates
// (tileprim/program.cuh): tp::RunPlace where it has a closed form, else tp::TablePlace over its
// tables, one per direction (tp::SlotTable; tp::NoSlots where the operand does not move that way).
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "layout/placement.h"

namespace tp {

// Tables declared once each, named after their direction and values: operands placed alike
// share them (a map's operands then read one table, not one each). A load table and a store
// table alike stay apart: with one, a map over a thread's 1024 slots keeps its elements live
// through the body (79 registers, not 64).
class PlaceTables {
 public:
  // The table's name: `fresh` where these values are new (declared by the next take()).
  std::string name(const std::vector<int>& values, bool loads, const std::string& fresh);
  // The declarations of the tables named since the last call.
  std::string take() { return std::exchange(decls_, ""); }

 private:
  std::map<std::pair<bool, std::vector<int>>, std::string> names_;
  std::string decls_;
};

// `name` as a tp::TablePlace over p's tables (those of the directions it moves), sliced to one
// entry per slot where every lane reads the same.
std::string table_place_type(const std::string& name, const RegisterPlacement& p, PlaceTables& tables,
                             bool load = true, bool store = true);

// tp::RunPlace<owners, vec[, padded elements]> of a closed form.
std::string run_place_type(const RunForm& f);

// `name` as the type through which tp::load_tile, store_tile, gather and scatter see a register
// placement: tp::RunPlace where it has a closed form, else tp::TablePlace over its tables
// (`name`_load, `name`_store).
std::string cuda_place_type(const std::string& name, const RegisterPlacement& p);

}  // namespace tp
