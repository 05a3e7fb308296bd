#include "ops/dtype.h"

#include "errors.h"

namespace tp {

namespace {
constexpr DType kAll[] = {DType::float16, DType::bfloat16, DType::float32, DType::float64, DType::int32,
                           DType::int64};
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::float16: return "float16";
    case DType::bfloat16: return "bfloat16";
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
  }
  return "?";
}

DType dtype_from_name(const std::string& name, const std::string& arg) {
  for (DType t : kAll) {
    if (name == dtype_name(t)) return t;
  }
  throw TypeError(arg + ": dtype " + name + " is not supported; tileprim holds float16, bfloat16, float32, "
                  "float64, int32 and int64");
}

int dtype_size(DType t) {
  switch (t) {
    case DType::float16:
    case DType::bfloat16: return 2;
    case DType::float32:
    case DType::int32: return 4;
    case DType::float64:
    case DType::int64: return 8;
  }
  return 0;
}

const char* dtype_cuda_name(DType t) {
  switch (t) {
    case DType::float16: return "__half";
    case DType::bfloat16: return "__nv_bfloat16";
    case DType::float32: return "float";
    case DType::float64: return "double";
    case DType::int32: return "int";
    case DType::int64: return "long long";
  }
  return "?";
}

bool is_16bit_float(DType t) { return t == DType::float16 || t == DType::bfloat16; }

bool is_integer(DType t) { return t == DType::int32 || t == DType::int64; }

}  // namespace tp
