// A reduction's fold view with its slots looked up in tables built once per plan: the slots of
// the plan's ReduceView (memory_offset of every index, swizzle included), without a division per
// element. The CPU executors hand it to the same device templates in place of the ReduceView, so
// the fold visits the same slots in the same order: the same bits, faster on the host.
#pragma once
#include <memory>
#include <vector>

#include "tileprim/reduction/view.cuh"

namespace tp {

struct TableView {
  static constexpr int kUnroll = kUnrollMemory;
  int spatial = 0;
  int reduce = 0;
  const long long* src = nullptr;  // null: slot == index
  const long long* dst = nullptr;

  long long src_slot(int k, int j) const {
    const long long i = static_cast<long long>(k) * reduce + j;
    return src ? src[i] : i;
  }
  long long dst_slot(int k) const { return dst ? dst[k] : k; }
};

// Owns the tables; `view` points into them.
class SlotTables {
 public:
  template <class View> explicit SlotTables(const View& v) {
    view.spatial = v.spatial;
    view.reduce = v.reduce;
    const long long n = static_cast<long long>(v.spatial) * v.reduce;
    bool src_identity = true, dst_identity = true;
    src_.resize(static_cast<size_t>(n));
    for (long long i = 0; i < n; ++i) {
      src_[i] = memory_offset(v.src, i);
      src_identity = src_identity && src_[i] == i;
    }
    dst_.resize(static_cast<size_t>(v.spatial));
    for (int k = 0; k < v.spatial; ++k) {
      dst_[k] = memory_offset(v.dst, k);
      dst_identity = dst_identity && dst_[k] == k;
    }
    view.src = src_identity ? nullptr : src_.data();
    view.dst = dst_identity ? nullptr : dst_.data();
  }
  SlotTables(const SlotTables&) = delete;
  SlotTables& operator=(const SlotTables&) = delete;

  TableView view;

 private:
  std::vector<long long> src_, dst_;
};

}  // namespace tp
