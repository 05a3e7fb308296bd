// The variants tileprim ships, one file each under variants/<family>/.
#include "dispatch/registry.h"

namespace tp {

void register_reduction_local(Registry& r);
void register_reduction_cross_warp(Registry& r);
void register_reduction_shared(Registry& r);
void register_reduction_sm100_packed(Registry& r);
void register_elementwise_reg(Registry& r);
void register_copy_stage(Registry& r);
void register_gather(Registry& r);
void register_gather_global(Registry& r);
void register_scatter_held(Registry& r);
void register_treduce_root_pull(Registry& r);
void register_treduce_scatter_gather(Registry& r);
void register_treduce_chain(Registry& r);

void register_builtin_variants(Registry& r) {
  register_reduction_local(r);
  register_reduction_cross_warp(r);
  register_reduction_shared(r);
  register_reduction_sm100_packed(r);
  register_elementwise_reg(r);
  register_copy_stage(r);
  register_gather(r);
  register_gather_global(r);
  register_scatter_held(r);
  register_treduce_root_pull(r);
  register_treduce_scatter_gather(r);
  register_treduce_chain(r);
}

}  // namespace tp
