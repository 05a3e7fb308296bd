// The kernel frame's launch shape: how a block takes a kernel's tiles and how each operand moves
// between global memory and the body, made from the frame's operands and the arch alone (no GPU,
// no compiler, no text). A block holds `instances` scope instances of `threads` threads, each
// taking `rounds` tiles in turn: in round r, instance i of block b runs tile
// b * instances * rounds + r * instances + i. kernel_frame.h renders the shape as declarations and
// calls of the device templates (tileprim/frame.cuh) that run it.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/plan.h"

namespace tp {

// A body: its declarations and statements, and what the frame must know of it.
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
  // Where > 0, the registers per thread ptxas is asked to fit (the blocks per SM they allow, in
  // __launch_bounds__): a program with an estimated chain (estimated_chain.h) whose leaves stay
  // live across the check runs faster at the occupancy of fewer registers than ptxas takes
  // unasked, its rare path spilling a little.
  int register_target = 0;
};

// One parameter of the kernel and what the frame knows of it.
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
  // An output summed over each block's run of tiles (FrameSpec::folded_tiles) instead of stored per tile: a
  // tile of `dtype` a run, in float32 (float64 for float64), each element added by the thread that stores it
  bool folded = false;
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
  int max_instances = 0;  // scope instances per block at most (kernel_build.cc's fewer-warp blocks); 0: the scope's
  // Where its block holds one instance alone on its SM, the body's work outlasts a tile's load
  // (a program's maps_outlast_row_load): kernel_build.cc then builds it with `prefetch`.
  bool prefetch_if_alone = false;
  // A block of one instance, alone on its SM: its register tiles of the batch are each copied
  // into shared memory during the round before the one that takes them.
  bool prefetch = false;
  // Where > 0, each block takes this many consecutive tiles of the batch, one at a time (one instance,
  // one round), and its `folded` outputs are summed over them in order: a norm's weight gradient
  // folded where it is computed instead of written a row at a time and read again (program_plan.h)
  long long folded_tiles = 0;
};

// How the frame moves one operand between global memory and the body.
enum class OperandPath {
  parameter,      // not staged: a scalar the body reads, or a parameter it never touches
  body_moved,     // the body moves it itself, a chunk at a time (a program's rows in passes)
  direct,         // registers: each thread's run of at most 16 bytes, straight from global memory,
                  // every round's loaded before the rounds
  run,            // registers: each thread's long run read from global memory as the body folds it
                  // (in place, or through its warp's window where the shape has one)
  placed,         // registers: loaded and stored where the tile lies (its placement in closed form);
                  // an operand the batch shares is read from its one tile so
  prefetched,     // registers: placed, but each round's tile (after the first) read from the copy in
                  // shared memory that the round before started (FrameSpec::prefetch)
  skewed,         // registers: through the block's skewed staging area (16-byte copies, then
                  // gathers and scatters by table)
  block_tile,     // shared: the block's run of tiles, copied as it is (cp.async where the arch has it)
  instance_tile,  // shared: each instance's tile, moved element by element by its layout
  once_tile,      // shared: the batch's one tile, staged once per instance
};

// The path's name: "direct", "run", "block_tile", ...
const char* path_name(OperandPath path);

// Where an operand's shared area starts: within the block's staging (skewed, block_tile) or
// within one instance's tiles (instance_tile, once_tile).
struct OperandLaunch {
  std::string name;
  OperandPath path = OperandPath::parameter;
  long long offset = 0;
};

struct LaunchShape {
  int threads = 1;    // per scope instance (a cluster's: all its CTAs')
  int ctas = 1;       // CTAs per scope instance: a cluster's, launched as a thread-block cluster
  int instances = 1;  // scope instances per block
  int rounds = 1;     // tiles each instance takes in turn
  int stages = 1;     // parts of the block's run of shared tiles, each waited for before its rounds
  bool async = false;         // cp.async stages the block's shared tiles (sm_80 and later)
  bool block_tiles = false;   // every shared tile is row-major: the block stages them as they are
  bool clamped = false;       // instances past the batch's end run the body too (KernelBody::syncs_instances)
  int window_stages = 0;      // chunks of each warp's run window; 0: runs read in place
  int chunk_slots = 0;        // a map's slots per body call where a thread's are taken in chunks; 0: all
  std::vector<OperandLaunch> operands;  // one per FrameSpec operand, in order
  // Shared memory of a block, in order: the block's staging; each instance's tiles; each
  // instance's copies of the batch's one tiles; each instance's body area; the warps' windows.
  long long instance_tiles_at = 0, instance_tiles_bytes = 0;  // bytes of one instance's
  long long once_at = 0, once_bytes = 0;
  long long body_at = 0, body_bytes = 0;
  long long windows_at = 0;
  long long folds_at = 0;       // the folded outputs' sums, one tile each (FrameSpec::folded_tiles)
  long long folded_tiles = 0;   // consecutive tiles a block takes one after another; 0: none
  long long shared_bytes = 0;  // per block, at launch
  std::string why;             // why this many instances per block and rounds
  // How each staged operand moves between global memory and the body, by name, in words
  std::vector<std::pair<std::string, std::string>> staging;

  int block_threads() const { return threads / ctas * instances; }
  int tiles_per_block() const { return instances * rounds; }
  // The grid for a batch of `tiles`: a cluster's CTAs take one tile together.
  long long blocks(long long tiles) const {
    const long long per_block = tiles_per_block() * (folded_tiles > 0 ? folded_tiles : 1);
    return (tiles + per_block - 1) / per_block * ctas;
  }
  bool any(OperandPath path) const;
};

// The dtype a folded output is summed and written in (FrameOperand::folded): float32, float64 for
// float64 tiles.
DType folded_sum_dtype(const FrameOperand& s);
// A folded output's sums in the block's shared memory: a tile of folded_sum_dtype, 16-byte aligned;
// they follow one another from LaunchShape::folds_at (0 for an output not folded).
long long folded_sum_bytes(const FrameOperand& s);

// The launch shape for `arch` (its shared-memory limit bounds the instances per block).
// ValueError when one instance needs more shared memory than the arch has.
LaunchShape launch_shape(const FrameSpec& spec, const std::string& arch);

// Scope instances per block before shared memory limits them, and why (one per block for a
// CTA that is not whole warps; warpgroup and CTA instances each sync on a named barrier).
std::pair<int, std::string> scope_instances(const ExecScope& scope);

}  // namespace tp
