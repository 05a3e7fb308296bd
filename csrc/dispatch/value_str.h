// How tp.plan and errors print a config or param value: Python's spelling (True, 3, [1, 2]),
// strings quoted where the value is an argument the caller wrote ('sum'), bare where it is a
// plan's own word.
#pragma once
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

namespace tp {

template <class... Ts> std::string value_str(const std::variant<Ts...>& v, bool quote_strings) {
  std::ostringstream os;
  std::visit(
      [&](const auto& x) {
        using V = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<V, bool>) {
          os << (x ? "True" : "False");
        } else if constexpr (std::is_same_v<V, std::string>) {
          if (quote_strings) os << "'" << x << "'";
          else os << x;
        } else if constexpr (std::is_same_v<V, std::vector<long long>>) {
          os << "[";
          for (size_t i = 0; i < x.size(); ++i) os << (i ? ", " : "") << x[i];
          os << "]";
        } else {
          os << x;
        }
      },
      v);
  return os.str();
}

}  // namespace tp
