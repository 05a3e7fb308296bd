// copy -> stage on the CPU: staging in and out of a placement is a bijection on the tile's
// logical elements, so the copy's result in logical order is its source, broadcast where the
// shapes differ: out element i reads the source element at i's coordinates (size-1 dims at 0).
// The bits are those of any placement's run: values move unchanged.
#include "backends/cpu/copy_executor.h"

#include <algorithm>
#include <cstring>

#include "backends/cpu/parallel.h"
#include "ops/dtype.h"

namespace tp {

namespace {

class CopyRunner : public Runner {
 public:
  explicit CopyRunner(const Plan& plan)
      : in_elements_(plan.call.inputs[0].elements()),
        out_elements_(plan.call.output.elements()),
        bytes_(dtype_size(plan.call.output.dtype)) {
    const std::vector<long long>& in = plan.call.inputs[0].shape;
    const std::vector<long long>& out = plan.call.output.shape;
    if (in == out) return;
    // source index of every output element: row-major coordinates, right-aligned
    source_.resize(static_cast<size_t>(out_elements_));
    for (long long i = 0; i < out_elements_; ++i) {
      long long rest = i, at = 0, stride = 1;
      for (size_t k = 0; k < out.size(); ++k) {
        const size_t d = out.size() - 1 - k;
        const long long c = rest % out[d];
        rest /= out[d];
        if (k < in.size()) {
          const long long extent = in[in.size() - 1 - k];
          at += (extent == 1 ? 0 : c) * stride;
          stride *= extent;
        }
      }
      source_[static_cast<size_t>(i)] = at;
    }
  }

  void run(const RunArgs& args) const override {
    const auto* in = reinterpret_cast<const unsigned char*>(args.inputs[0].data);
    auto* out = reinterpret_cast<unsigned char*>(args.output.data);
    parallel_for(args.tiles, out_elements_, args.interrupted, [&](long long begin, long long end, const auto& keep_going) {
      for (long long t = begin; t < end && keep_going(); ++t) {
        const unsigned char* src = in + static_cast<size_t>(t * in_elements_ * bytes_);
        unsigned char* dst = out + static_cast<size_t>(t * out_elements_ * bytes_);
        if (source_.empty()) {
          std::memcpy(dst, src, static_cast<size_t>(out_elements_ * bytes_));
          continue;
        }
        switch (bytes_) {
          case 2: gather<std::uint16_t>(dst, src); break;
          case 4: gather<std::uint32_t>(dst, src); break;
          default: gather<std::uint64_t>(dst, src); break;
        }
      }
    });
  }

 private:
  template <class Word> void gather(unsigned char* dst, const unsigned char* src) const {
    Word* d = reinterpret_cast<Word*>(dst);
    const Word* s = reinterpret_cast<const Word*>(src);
    if (in_elements_ == 1) {  // one value per tile (a keepdims reduction's) spread over the tile
      std::fill(d, d + out_elements_, s[0]);
      return;
    }
    for (size_t i = 0; i < source_.size(); ++i) d[i] = s[source_[i]];
  }

  long long in_elements_, out_elements_;
  long long bytes_;
  std::vector<long long> source_;  // empty: the shapes agree
};

class CopyExecutor : public Executor {
 public:
  std::shared_ptr<const Runner> bind(const Plan& plan) const override { return std::make_shared<CopyRunner>(plan); }
};

}  // namespace

void register_cpu_copy(ExecutorTable& table) { table.add("stage", "cpu", std::make_unique<CopyExecutor>()); }

}  // namespace tp
