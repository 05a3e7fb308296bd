// tileprim device library: the facade. Generated kernels include this one header.
#pragma once
#include "comm/treduce_kernel.cuh"
#include "config.cuh"
#include "elementwise/maps.cuh"
#include "lanes.cuh"
#include "layout.cuh"
#include "numeric.cuh"
#include "program.cuh"
#include "reduction/lane_reduce.cuh"
#include "reduction/shared_groups.cuh"
#include "reduction/sm100_packed.cuh"
#include "reduction/thread_loop.cuh"
#include "staging.cuh"
