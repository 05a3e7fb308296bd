#!/usr/bin/env bash
# Everything one GPU lease does, in one call: build, the GPU tests, compute-sanitizer over the
# GPU suite, the benchmarks (benchmarks/run.py: python -m tileprim bench of the checkout; its JSON
# in $OUT/bench.json). Logs go to $OUT/<step>.log; a summary line per step is printed.
#   bash benchmarks/on_gpu.sh [install] [test] [sanitize] [bench] [programs] [programs_backward] [profile] [scopes]
#        [fastmath] [fastmath_bench] [treduce] [processes] [nccl] [layers]
#   (default: the first four; treduce: on a multi-GPU host, in under 8 minutes after install, the treduce
#   benchmark at GPUS (default 2,4) for one process and both transports, then side by side the GPU
#   treduce tests in one process and across processes at 2 and 4 ranks (8 too where GPUS has 8)
#   and compute-sanitizer over the chain and the one-shot path on small cases; processes: the
#   multi-process treduce tests and benchmark, 2+ GPUs;
#   nccl: the NCCL transport's benchmark, on NVLink and on NCCL's network transport; programs: the
#   tile-program benchmark, $OUT/programs.json, Liger installed from .whl/ where carried;
#   programs_backward: its forward + backward cases alone, $OUT/programs_backward.json; scopes: the
#   CTA-size and staging sweep of the programs, $OUT/scopes_*.log; layers: the LLM layers' GPU tests, memcheck
#   and racecheck over them, their benchmark beside torch, torch.compile and Liger ($OUT/layers.json) and the
#   patched Hugging Face Llama, no scope named, then with --scope cta256); fastmath: issue 45's checks: the
#   fastmath GPU tests and the exact 16-bit maps' CPU = GPU bits, the approximations' accuracy table
#   ($OUT/fastmath_errors.json, to copy over python/tileprim/fastmath_errors.json), memcheck over
#   fastmath programs; fastmath_bench: the rows on both paths beside the peers,
#   $OUT/fastmath_programs.json and $OUT/fastmath_maps.json)
set -u
OUT=${OUT:-/tmp/tileprim-gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 TILEPRIM_CACHE_DIR=/tmp/tileprim-cache
steps=${*:-install test sanitize bench}
want() { [[ " $steps " == *" $1 "* ]]; }

step() {
  local name=$1; shift
  local start=$SECONDS
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name: rc=$rc, $((SECONDS - start)) s"
  tail -n "${TAIL:-4}" "$OUT/$name.log" | sed 's/^/   /'
}

# wheels carried in .whl/ (Liger, the tile-program benchmark's peer: the machine has no network)
carried_wheels() {
  if ls .whl/*.whl >/dev/null 2>&1 && [[ ":${PYTHONPATH:-}:" != *":/tmp/site:"* ]]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
}

# what the sanitizers run: memcheck the single-GPU suite in float32 (every variant and path,
# PyTorch/CuPy/JAX, graphs, many tiles per block, unaligned views, paired float16 maps, long
# runs read in place, lane runs, pipelined shared staging, chunked maps); racecheck and
# synccheck the kernels with barriers (shared tiles, several instances per block, cp.async
# parts, run windows, chunked maps of warps)
MEMCHECK=(tests/test_cuda_gpu.py -k "float32 or torch or cupy or jax or graph or many_tiles or unaligned or paired or long_ or warp_rows or pipelined or many_slots")
RACECHECK=(tests/test_cuda_gpu.py -k "many_tiles or (reductions and float32) or unaligned or pipelined or windows or long_thread_rows or (warp_rows and 256) or many_slots")
# the tile programs: memcheck every float32 program, scope and staging, device arrays and graphs;
# racecheck and synccheck the fused kernels with barriers (several instances per block, rows in passes)
PROGRAM_MEMCHECK=(tests/test_program_gpu.py tests/test_numerics_gpu.py::test_division_by_one_value_gives_the_cpu_bits
                 tests/test_layers_gpu.py::test_cross_entropy_forward_and_backward_give_the_cpu_bits
                 -k "float32 or device_arrays or graph or division or 128256")
PROGRAM_RACECHECK=(tests/test_program_gpu.py -k "(fused and float32 and (softmax or add_rmsnorm)) or (passes and float32)")

if want install; then
  step env bash -c 'nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvidia-smi topo -m;
                    python3 --version; python3 -c "import torch, numpy; print(torch.__version__, numpy.__version__)"'
  step install python3 -m pip install --no-build-isolation --no-deps -q .
  carried_wheels
  step info python3 -m tileprim info
  TAIL=12 step demo python3 -m tileprim demo
fi
if want test; then
  TAIL=6 step pytest_gpu python3 -m pytest tests -m gpu -q -p no:cacheprovider -n 8 --maxfail=30 -rfE \
    --ignore tests/test_treduce_processes.py
  # the multi-process tests apart, fewer at once: their ranks share the GPUs there are, and a
  # rank's waits on a GPU time-sliced between many processes stretch past the tests' deadlines
  TAIL=6 step pytest_gpu_processes python3 -m pytest tests/test_treduce_processes.py -m gpu -q -p no:cacheprovider \
    -n 4 -rfE
fi
if want sanitize; then
  step sanitizer_memcheck compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 \
    python3 -m pytest "${MEMCHECK[@]}" -q -p no:cacheprovider -x
  for tool in racecheck synccheck; do
    step "sanitizer_$tool" compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 \
      python3 -m pytest "${RACECHECK[@]}" -q -p no:cacheprovider -x
  done
  step sanitizer_programs_memcheck compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 \
    python3 -m pytest "${PROGRAM_MEMCHECK[@]}" -m gpu -q -p no:cacheprovider -x
  for tool in racecheck synccheck; do
    step "sanitizer_programs_$tool" compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 \
      python3 -m pytest "${PROGRAM_RACECHECK[@]}" -m gpu -q -p no:cacheprovider -x
  done
  # treduce across processes, each rank under the tool (ranks share the GPUs there are): every
  # tool over cuda_ipc; memcheck over nccl with every rank on a host of its own (NCCL's kernels too)
  for tool in memcheck racecheck synccheck; do
    TILEPRIM_RANK_WRAPPER="compute-sanitizer --tool $tool --error-exitcode 99 --print-limit 20" \
      step "sanitizer_treduce_processes_$tool" python3 -m pytest tests/test_treduce_processes.py -q -p no:cacheprovider \
      -rfE -k "(gpu_transports or disagree or work_apart) and cuda_ipc"
  done
  TILEPRIM_RANK_WRAPPER="compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20" \
    step sanitizer_treduce_nccl_memcheck python3 -m pytest tests/test_treduce_processes.py -q -p no:cacheprovider \
    -rfE -k "nccl and ((work_apart and 3) or 2-nccl-hosts or fold_fails)"
  if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then  # treduce in one process on 2 GPUs
    for tool in memcheck racecheck synccheck; do
      step "sanitizer_treduce_$tool" compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 \
        python3 -m pytest tests/test_treduce_gpu.py tests/test_treduce_repeated_gpu.py -q -p no:cacheprovider -x \
          -k "2gpus and small and float32 or sharing or repeat"
    done
  fi
fi
if want bench; then
  # benchmarks/run.py: the installed package has no suite beside it (python -m tileprim bench needs a checkout's)
  TAIL=12 step bench python3 benchmarks/run.py --json "$OUT/bench.json"
fi
if want programs; then  # the tile-program benchmark alone (also inside bench), beside torch, torch.compile, Liger
  carried_wheels
  TAIL=40 step programs python3 benchmarks/programs.py --json "$OUT/programs.json"
fi
if want programs_backward; then  # softmax and RMSNorm forward + backward, the program's backward derived
  carried_wheels
  TAIL=20 step programs_backward python3 benchmarks/programs.py --only fwd+bwd --json "$OUT/programs_backward.json"
fi
if want profile; then  # the cases whose targets are hardest, through Nsight Compute
  for case in "sum K=128 thread" "sum K=32 cta(32)" "exp float16" "program softmax 32768x4096 bfloat16" \
              "program softmax 32768x16384 bfloat16" "program logsumexp 32768x16384 bfloat16" \
              "program softmax 32768x4096 bfloat16 fastmath" "exp bfloat16 fastmath"; do
    step "ncu_${case//[^a-z0-9]/_}" ncu --clock-control none --kernel-name tp_kernel --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats --section Occupancy \
      --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
      python3 benchmarks/profile_cases.py "$case"
  done
fi
if want scopes; then  # the sweep that checks the planner's cost model (scope_cost.cc), and its choice, last
  for spec in "4096 float32" "16384 float32" "4096 bfloat16" "16384 bfloat16"; do
    TAIL=2 step "scopes_${spec// /_}" python3 benchmarks/program_scopes.py $spec softmax rmsnorm add_rmsnorm logsumexp
  done
fi
if want layers; then  # issue 48: tanh/erf/sigmoid, comparisons, where, index tiles, take_along_axis, the layers
  carried_wheels
  # (the new elementwise ops' CPU = GPU bits over every dtype are test_numerics_gpu.py's, in the test step)
  TAIL=8 step layers_gpu python3 -m pytest tests/test_layers_gpu.py tests/test_gather.py tests/test_index_dtypes.py \
    tests/test_layers.py tests/test_elementwise.py -m gpu -q -p no:cacheprovider -n 8 -rfE
  for tool in memcheck racecheck; do
    step "sanitizer_layers_$tool" compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 \
      python3 -m pytest tests/test_layers_gpu.py -m gpu -q -p no:cacheprovider -x -k "float32 or int32 or cross_entropy"
  done
  TAIL=60 step layers_bench python3 benchmarks/llm_layers.py --json "$OUT/layers.json"
  TAIL=60 step layers_bench_cta256 python3 benchmarks/llm_layers.py --scope cta256 --json "$OUT/layers_cta256.json"
  TAIL=8 step patch_llama python3 examples/layers/patch_llama.py --liger
  TAIL=8 step patch_llama_cta256 python3 examples/layers/patch_llama.py --liger --scope cta256
fi
if want fastmath; then  # issue 45: fastmath=True and the cheaper exact 16-bit maps
  # the 16-bit exp, exp2, log and log2 whose exact forms changed: every input, the CPU's bits
  TAIL=6 step fastmath_tests python3 -m pytest tests/test_fastmath.py tests/test_numerics_gpu.py -m gpu -q \
    -p no:cacheprovider -n 8 -rfE -k "fastmath or (every_elementwise_op and (exp or log) and (float16 or bfloat16))"
  TAIL=12 step fastmath_accuracy python3 benchmarks/accuracy.py --fastmath --json "$OUT/fastmath_errors.json"
  step fastmath_memcheck compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 \
    python3 -m pytest tests/test_fastmath.py -m gpu -q -p no:cacheprovider -x \
    -k "runs_the_approximation or (programs and 4224) or activation_programs"
fi
if want fastmath_bench; then  # issue 45's rows, exact and fastmath, beside the peers
  carried_wheels
  TAIL=20 step fastmath_programs python3 benchmarks/programs.py --only "softmax 32768x4096 bfloat16" \
    --only "softmax 32768x16384 bfloat16" --only "logsumexp 32768x4096 bfloat16" \
    --only "logsumexp 32768x16384 bfloat16" --json "$OUT/fastmath_programs.json"
  TAIL=14 step fastmath_maps python3 benchmarks/run.py --only "exp float16" --only "exp bfloat16" \
    --only "silu float16" --only "silu bfloat16" --only "log2 float16" --only "log2 bfloat16" \
    --json "$OUT/fastmath_maps.json"
fi
if want processes; then
  TAIL=6 step pytest_processes python3 -m pytest tests/test_treduce_processes.py -q -p no:cacheprovider -rfE
  TAIL=40 step treduce_processes python3 benchmarks/treduce.py --distributed --verify --gpus "${GPUS:-2}" \
    --sizes "${SIZES:-4K,64K,1M,16M,64M,256M}" --json "$OUT/treduce_processes.json"
fi
if want nccl; then  # the NCCL transport: on NVLink, then with NCCL forced onto its network transport
  TAIL=30 step treduce_nccl python3 benchmarks/treduce.py --distributed --transport nccl --verify \
    --gpus "${GPUS:-2}" --sizes "${SIZES:-4K,64K,1M,16M,64M,256M}" --json "$OUT/treduce_nccl.json"
  TAIL=30 step treduce_nccl_network python3 benchmarks/treduce.py --network --transport nccl --verify \
    --gpus "${GPUS:-2}" --sizes "${SIZES:-4K,64K,1M,16M,64M,256M}" --json "$OUT/treduce_nccl_network.json"
fi
if want treduce; then
  # each part under a deadline (a hang shows as rc=124), so the whole stays under 9 minutes with
  # install: the benchmark alone (its times), then the one-process tests, the sanitizers and the
  # process tests side by side (correctness only; their ranks' waits have deadlines far longer
  # than a GPU shared with a sanitized process stretches them). NCCL says why a call fails (WARN).
  G=${GPUS:-2,4}
  # about 100 s per GPU count; a series that hangs costs its 60 s deadline and the rest still fits
  BENCH_S=$((130 * $(echo "$G" | tr ',' '\n' | wc -l) + 20))
  NCCL_DEBUG=WARN TAIL=150 step treduce_bench timeout "$BENCH_S" python3 benchmarks/treduce.py --gpus "$G" \
    --distributed --transport cuda_ipc,nccl --verify --sizes "${SIZES:-4K,64K,1M,16M,64M,256M}" --deadline 60 \
    --json "$OUT/treduce.json"
  TAIL=6 step treduce_tests timeout 160 python3 -m pytest tests/test_treduce_gpu.py tests/test_treduce_repeated_gpu.py \
    -m gpu -q -p no:cacheprovider -n 6 -rfE &
  SAN="compute-sanitizer --error-exitcode 99 --print-limit 20 --tool"
  for tool in memcheck racecheck synccheck; do  # the chain across processes: every rank under the tool
    TILEPRIM_RANK_WRAPPER="$SAN $tool" step "treduce_sanitizer_chain_$tool" timeout 160 python3 -m pytest \
      tests/test_treduce_processes.py -q -p no:cacheprovider -rfE -k "cuda_ipc_chain" &
  done
  # the chain and the one-shot root_pull in one process (a hang here: the tool ran one GPU's kernel at a time)
  step treduce_sanitizer_one_process timeout 160 $SAN memcheck python3 -m pytest tests/test_treduce_gpu.py -q \
    -p no:cacheprovider -rfE -k "gpu_equals_cpu and small and float32 and sum and (chain or root_pull)" &
  EIGHT=$([[ ",$G," == *",8,"* ]] && echo "" || echo "and not eight")
  NCCL_DEBUG=WARN TAIL=12 step treduce_processes timeout 160 python3 -m pytest tests/test_treduce_processes.py -m gpu \
    -q -p no:cacheprovider -n 8 -rfE -k "not cuda_ipc_chain $EIGHT" &
  wait
fi
