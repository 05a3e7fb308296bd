// The DLPack structs tileprim exports device buffers with (ABI of DLPack 0.8, the "dltensor"
// capsule every consumer accepts), and the C exchange table of DLPack 1.3 that array types
// publish as `type.__dlpack_c_exchange_api__` (read by bindings/dlpack_exchange.h). Declared
// here rather than vendored: these few lines are the whole ABI we use.
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

// DLPack 1.3's exchange table, as far as tileprim calls it (the producer's functions it does not
// call are opaque pointers; their slots keep the layout).
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct ExchangeApiHeader {
  DLPackVersion version;
  ExchangeApiHeader* prev_api;  // an older version's table, or null
};
struct ExchangeApi {
  ExchangeApiHeader header;
  void* managed_tensor_allocator;
  void* managed_tensor_from_py_object_no_sync;
  void* managed_tensor_to_py_object_no_sync;
  // Fills `out` with a view valid until control returns to Python; 0, or -1 with an error set.
  int (*dltensor_from_py_object_no_sync)(void* py_object, DLTensor* out);
  // The producer's current stream of a device (torch.cuda.current_stream); 0, or -1 with an error set.
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void** out_current_stream);
};

}  // namespace tp::dlpack
