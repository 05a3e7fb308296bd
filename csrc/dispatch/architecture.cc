#include "dispatch/architecture.h"

#include <algorithm>

#include "errors.h"

namespace tp {

const std::vector<std::string>& known_targets() {
  static const std::vector<std::string> targets = {
      "sm_75",  "sm_80",   "sm_86",   "sm_87",  "sm_88",   "sm_89",   "sm_90",   "sm_90a",  "sm_100", "sm_100a",
      "sm_100f", "sm_101", "sm_101a", "sm_101f", "sm_103", "sm_103a", "sm_103f", "sm_110", "sm_110a",
      "sm_110f", "sm_120", "sm_120a", "sm_120f", "sm_121", "sm_121a", "sm_121f"};
  return targets;
}

int sm_version(const std::string& target) {
  if (target.empty()) return 0;
  static const std::string kPtx = "compute_";
  if (target.rfind(kPtx, 0) == 0 && target.size() > kPtx.size() && target.size() <= kPtx.size() + 4 &&
      std::all_of(target.begin() + kPtx.size(), target.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::stoi(target.substr(kPtx.size()));
  }
  const auto& known = known_targets();
  if (std::find(known.begin(), known.end(), target) == known.end()) {
    std::string names;
    for (const std::string& t : known) names += (names.empty() ? "" : ", ") + t;
    throw ValueError("target: '" + target + "' is not a known architecture; the targets are " + names);
  }
  return std::stoi(target.substr(3));
}

SmLimits sm_limits(const std::string& arch) {
  const int sm = sm_version(arch);
  SmLimits l;  // sm_90, sm_100, sm_103, sm_110
  if (sm <= 75) {  // and no architecture: the smallest
    l.threads = 1024;
    l.blocks = 16;
    l.shared = l.shared_per_block = 64 * 1024;
    l.shared_reserved_per_block = 0;
  } else if (sm == 80 || sm == 87) {
    l.blocks = sm == 87 ? 16 : 32;
    l.shared = 164 * 1024;
    l.shared_per_block = 163 * 1024;
  } else if (sm < 90 || sm >= 120) {  // sm_86, sm_88, sm_89, sm_120, sm_121
    l.threads = 1536;
    l.blocks = sm == 86 || sm == 88 ? 16 : sm == 89 ? 24 : 32;
    l.shared = 100 * 1024;
    l.shared_per_block = 99 * 1024;
  }
  l.barriers = sm < 90 ? 0 : sm == 110 || sm >= 120 ? l.blocks : 2 * l.blocks;
  if (sm < 90) l.cluster_ctas = l.cluster_ctas_nonportable = 0;
  if (sm >= 120) l.cluster_ctas_nonportable = l.cluster_ctas;  // consumer Blackwell: 8 at most
  return l;
}

void check_cluster_target(int ctas, const std::string& target) {
  const SmLimits l = target_limits(target);
  if (l.cluster_ctas == 0) {
    throw ValueError("scope: a cluster of CTAs needs thread-block clusters (sm_90 and later); target " + target +
                     " has none (use tp.cta(n), or target='sm_90a')");
  }
  if (ctas > l.cluster_ctas_nonportable) {
    throw ValueError("scope: a cluster of " + std::to_string(ctas) + " CTAs is past target " + target + "'s most, " +
                     std::to_string(l.cluster_ctas_nonportable));
  }
}

SmLimits target_limits(const std::string& target) { return target.empty() ? SmLimits{} : sm_limits(target); }

std::string shared_bytes_str(long long bytes) {
  return (bytes % 1024 == 0 ? std::to_string(bytes / 1024) + " KiB (" : "") + std::to_string(bytes) +
         (bytes % 1024 == 0 ? " bytes)" : " bytes");
}

std::string sm_target(int cc) {
  const bool specific = cc == 90 || cc == 100 || cc == 103;
  return "sm_" + std::to_string(cc) + (specific ? "a" : "");
}

}  // namespace tp
