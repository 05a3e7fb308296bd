// TreduceOptions: a treduce call's options as one value, read by field (validation, the
// variants' planner). Python's tp.comm TreduceOptions builds it once per new call signature;
// of Python's nine options, backend lives in the DispatchContext and dispatch in OpCall.
#pragma once
#include <string>

namespace tp {

// Every field is given (treduce's defaults are its Python signature's).
struct TreduceOptions {
  std::string op;                   // a reduction of the op table
  int root = 0;                     // the rank whose dst receives the result
  long long tile_rows = 0;          // the chunk the fold slides over the last two dims
  long long tile_cols = 0;
  bool pingpong = false;            // two receive tiles: the next rank's chunk loads while one folds
  std::string valid;                // 'dynamic' (a partial last chunk) or 'static' (the tile divides)
  std::string accumulate;           // '' (the operand dtype) or 'float32'
  std::string transport;            // '' in one process; else how the processes' data meets (shm,
                                    // cuda_ipc, nccl)

  // The call's keywords as tp.plan prints them, Python's spelling, an empty text left out:
  // "op='sum', pingpong=False, root=0, tile_cols=256, tile_rows=64, valid='dynamic'".
  std::string str() const;
};

}  // namespace tp
