// The DLPack structs tileprim exports device buffers with (ABI of DLPack 0.8, the "dltensor"
// capsule every consumer accepts). Declared here rather than vendored: these few lines are
// the whole ABI we use.
#pragma once
#include <cstdint>

namespace tp::dlpack {

enum DeviceType : int32_t { kDLCPU = 1, kDLCUDA = 2 };
enum TypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4 };

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // null: C-contiguous
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

}  // namespace tp::dlpack
