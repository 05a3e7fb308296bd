#include "variants/staged_operand.h"

#include <memory>

#include "layout/placement.h"

namespace tp {

OperandStaging staged_operand(int operand, const TileRef& t, const ExecScope& scope, bool load, bool store,
                              const std::string& arg) {
  OperandStaging s;
  s.operand = operand;
  s.dtype = t.dtype;
  s.elements = t.elements();
  s.load = load;
  s.store = store;
  const TileLayout layout = t.layout.value_or(TileLayout::row_major(t.shape));
  if (t.storage == Storage::local) {
    s.kind = Staging::registers;
    s.place = place_in_registers(layout, scope, arg);
  } else {
    s.kind = Staging::shared;
    s.layout = layout;
  }
  return s;
}

}  // namespace tp
