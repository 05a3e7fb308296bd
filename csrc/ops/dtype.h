// Element types. float16 is NumPy's, bfloat16 is ml_dtypes'; int32 and int64 hold indices and
// labels (and int32 treduce's integers).
#pragma once
#include <string>

namespace tp {

enum class DType { float16, bfloat16, float32, float64, int32, int64 };

const char* dtype_name(DType t);
DType dtype_from_name(const std::string& name, const std::string& arg);  // TypeError naming arg
int dtype_size(DType t);
const char* dtype_cuda_name(DType t);  // float, double, __half, __nv_bfloat16, int, long long
bool is_16bit_float(DType t);
bool is_integer(DType t);

}  // namespace tp
