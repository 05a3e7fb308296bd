// The CPU backend's tile frame, the counterpart of the CUDA kernel frame: for every tile it
// stages each operand as the plan says (registers or a shared tile), runs the variant's body
// on one scope instance (the device template with HostLanes), and writes the output back.
// A variant's CPU executor is only its body.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "backends/cpu/staging.h"
#include "dispatch/executor.h"

namespace tp {

// One scope instance's operands as the body sees them.
struct HostTile {
  std::vector<void*> in;   // per call input: its staged buffer, or null (scalar, unread)
  std::vector<int> in_stride;  // register slots per thread of each
  void* out = nullptr;
  int out_stride = 0;
  const double* scalars = nullptr;  // per call input
};
using HostBody = std::function<void(const HostTile&)>;

struct TypedStaging;  // an operand dtype's typed stage-in / stage-out (tile_frame.cc)

class HostTileRunner : public Runner {
 public:
  HostTileRunner(const Plan& plan, HostBody body);
  void run(const RunArgs& args) const override;

 private:
  void run_tiles(const RunArgs& args, long long begin, long long end, const std::function<bool()>& keep_going) const;
  int inputs_;
  std::vector<HostStaging> staging_;
  std::vector<const TypedStaging*> moves_;
  HostBody body_;
};

// An executor whose bind() makes the variant's body for a plan.
class HostTileExecutor : public Executor {
 public:
  using MakeBody = std::function<HostBody(const Plan&)>;
  explicit HostTileExecutor(MakeBody make) : make_(std::move(make)) {}
  std::shared_ptr<const Runner> bind(const Plan& plan) const override {
    return std::make_shared<HostTileRunner>(plan, make_(plan));
  }

 private:
  MakeBody make_;
};

}  // namespace tp
