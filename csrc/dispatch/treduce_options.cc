#include "dispatch/treduce_options.h"

#include <sstream>

namespace tp {

std::string TreduceOptions::str() const {
  std::ostringstream os;
  if (!accumulate.empty()) os << "accumulate='" << accumulate << "', ";
  os << "op='" << op << "', pingpong=" << (pingpong ? "True" : "False") << ", root=" << root
     << ", tile_cols=" << tile_cols << ", tile_rows=" << tile_rows;
  if (!transport.empty()) os << ", transport='" << transport << "'";
  os << ", valid='" << valid << "'";
  return os.str();
}

}  // namespace tp
