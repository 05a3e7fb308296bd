// The CUDA backend's one kernel frame. Every tile kernel, a standalone call's and a tile
// program's alike, is this frame around a body:
//   tp_kernel(<one parameter per kernel input: a device pointer, or a double for a scalar>,
//             <one device pointer per output>, long long tiles)
// and runs like the specification's demonstration programs: global -> storage scope -> the
// body's steps -> global. A block holds `instances` scope instances of `threads` threads, each
// taking `rounds` tiles in turn: in round r, instance i of block b runs tile
// b * instances * rounds + r * instances + i. How each operand is staged follows from its
// placement: register runs of at most 16 bytes per thread move straight between global memory
// and registers; other register placements in closed form (tp::RunPlace) load and store by
// vectors where they lie; the rest go through a skewed staging area the block copies with
// 16-byte accesses; long runs may be read in place; shared tiles laid out row-major are staged
// by the block (asynchronously, pipelined), others per instance by their layout; an operand
// the whole batch shares is read from its one tile (registers where they lie, a shared tile
// staged once per instance). In between, the body: declarations and
// statements on the staged operands, by name (in0, ..., out, out1, ...). A standalone call's
// body is one call of its variant's device template (a program of one step); a program's is
// one such call per step with the scope's barrier where a step's output crosses threads.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/plan.h"
#include "tileprim/layout.cuh"

namespace tp {

// The frame's one __global__ function, by name (extern "C").
constexpr const char* kKernelName = "tp_kernel";

struct KernelBody {
  std::string decls;  // constexpr descriptors, inside namespace tp_gen
  std::string call;   // statements on this instance's staged operands
  // The call reads its register sources only by index (never as an array), so a large
  // thread's run can be read from global memory as it is used (tp::GlobalRun).
  bool indexes_sources = false;
  // Each slot's result is a function of that slot alone (a map), so a thread's slots may be
  // taken a chunk at a time: the call then covers kBodySlots slots, which the frame declares.
  bool maps_slots = false;
  // Shared memory of each instance the body uses itself (a program's tiles between steps), at
  // `smem`; the frame syncs the instance between rounds where it is used.
  long long shared_bytes = 0;
  // The body syncs its instance (a program's barriers between steps): where instances sync on
  // named barriers, one past the batch's end runs the last tile's body again and stores nothing,
  // so that every instance of the block passes the same barriers.
  bool syncs_instances = false;
  // The body moves some operands between global memory and registers itself (a program's rows
  // taken a chunk at a time): the frame names `live`, false where it must store nothing.
  bool stores_itself = false;
  // A fold of each lane's registers then across lanes (tp::lane_reduce): its functor and lane
  // group, so that a program may fold a row a chunk at a time with the same bits.
  std::string fold_op, fold_lanes;
};

// One parameter of the kernel and how the frame stages it around the body.
struct FrameOperand {
  std::string name;       // what the body reads or writes: in0, in1, ..., out, out1, ...
  bool output = false;    // outputs follow the inputs among the parameters
  // registers or shared; scalar: a double parameter named s<i> (the body reads it); an operand
  // with neither a placement nor a layout is a parameter the body never touches
  Staging kind = Staging::registers;
  DType dtype = DType::float32;
  std::vector<long long> shape;  // of one tile
  long long elements = 1;        // per tile
  bool load = true;        // read from global memory before the body
  bool store = false;      // written back after it
  bool batch_broadcast = false;  // one tile that every tile of the batch reads
  bool moved_by_body = false;    // neither placed nor laid out: the body moves it itself, by chunks
  std::shared_ptr<const RegisterPlacement> place;  // registers
  std::optional<TileLayout> layout;                // shared
  bool staged() const { return kind != Staging::scalar && (place || layout); }
};

struct FrameSpec {
  std::string title;     // the source's first line
  ExecScope scope;
  std::vector<FrameOperand> operands;  // in parameter order: the inputs, then the outputs
  std::vector<DType> dtypes;           // every element type the kernel touches
  KernelBody body;
};

// The launch shape and the source.
struct KernelSource {
  std::string text;
  std::string function = kKernelName;  // its __global__ function
  int threads = 1;    // per scope instance
  int instances = 1;  // scope instances per block
  int rounds = 1;     // tiles each instance takes in turn
  long long shared_bytes = 0;  // per block, at launch: staging, per-instance tiles, the body's, windows
  std::string why;             // why this many instances per block and rounds
  int min_blocks = 0;          // the blocks per SM ptxas was asked to fit (__launch_bounds__), 0: none
  // How each staged operand moves between global memory and the body, by name, in order
  std::vector<std::pair<std::string, std::string>> staging;
  int block_threads() const { return threads * instances; }
  int tiles_per_block() const { return instances * rounds; }
};

// The launch shape for `arch` (its shared-memory limit bounds the instances per block), with no
// text: the host-side value, made and checked without a GPU or a compiler; the body's text may
// follow from it (a program's barriers name the instances). ValueError when one instance needs
// more shared memory than the arch has.
KernelSource frame_launch(const FrameSpec& spec, const std::string& arch);
// The same, and the kernel's source; with `min_blocks`, ptxas asked to fit that many blocks per SM.
KernelSource render_kernel(const FrameSpec& spec, const std::string& arch, int min_blocks = 0);

// Scope instances per block before shared memory limits them, and why (one per block for a
// CTA that is not whole warps; warpgroup and CTA instances each sync on a named barrier).
std::pair<int, std::string> scope_instances(const ExecScope& scope);

// Declarations of the device descriptors, as the bodies print them.
std::string cuda_mem_layout(const MemLayout& L);

// The barrier of one scope instance (none at thread scope) in a block of `instances`.
std::string cuda_scope_sync(const ExecScope& scope, int instances);

// Declarations of `name`, the type through which tp::load_tile, store_tile, gather and scatter
// see a register placement: tp::RunPlace where it has a closed form, else tp::TablePlace over
// its tables (`name`_load, `name`_store).
std::string cuda_place_type(const std::string& name, const RegisterPlacement& p);

}  // namespace tp
