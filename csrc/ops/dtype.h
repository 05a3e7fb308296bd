// Element types. float16 is NumPy's, bfloat16 is ml_dtypes', int32 only for treduce.
#pragma once
#include <string>

namespace tp {

enum class DType { float16, bfloat16, float32, float64, int32 };

const char* dtype_name(DType t);
DType dtype_from_name(const std::string& name, const std::string& arg);  // TypeError naming arg
int dtype_size(DType t);
const char* dtype_cuda_name(DType t);  // float, double, __half, __nv_bfloat16, int
bool is_16bit_float(DType t);

}  // namespace tp
