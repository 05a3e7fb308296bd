// The few CUDA driver and NVRTC C declarations tileprim calls, copied from cuda.h and
// nvrtc.h (CUDA 13.0) with their exact numeric values. The package builds without a CUDA
// toolkit, so those headers are never included: libcuda.so.1 and libnvrtc are opened with
// dlopen and every entry point is reached through the function-pointer types below.
// They live in tp::cuda so they cannot collide with a real cuda.h elsewhere in a process.
#pragma once
#include <cstddef>

namespace tp::cuda {

// ---- driver (cuda.h) --------------------------------------------------------------------

typedef enum cudaError_enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_UNKNOWN = 999,  // the largest value, so the enum can hold every code
} CUresult;

typedef int CUdevice;
typedef unsigned long long CUdeviceptr;  // CUdeviceptr_v2 on 64-bit hosts
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;

typedef enum CUdevice_attribute_enum {
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 122,
} CUdevice_attribute;

typedef enum CUfunction_attribute_enum {
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14,
} CUfunction_attribute;

typedef enum CUpointer_attribute_enum {
  CU_POINTER_ATTRIBUTE_BUFFER_ID = 7,
  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
} CUpointer_attribute;

typedef struct CUipcMemHandle_st {
  char reserved[64];
} CUipcMemHandle;
constexpr unsigned int CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1;

constexpr unsigned int CU_STREAM_NON_BLOCKING = 0x1;
constexpr unsigned int CU_MEMHOSTALLOC_PORTABLE = 0x1;
constexpr unsigned int CU_MEMHOSTALLOC_DEVICEMAP = 0x2;
constexpr unsigned int CU_STREAM_WRITE_VALUE_DEFAULT = 0x0;  // a memory fence first, like __threadfence_system
constexpr unsigned int CU_STREAM_WAIT_VALUE_GEQ = 0x0;       // until (int64_t)(*address - value) >= 0
constexpr unsigned int CU_EVENT_DISABLE_TIMING = 0x2;
constexpr CUresult CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = static_cast<CUresult>(704);

// Entry points; the comment names the versioned symbol cuda.h maps the call to.
using PFN_cuInit = CUresult (*)(unsigned int flags);
using PFN_cuDriverGetVersion = CUresult (*)(int* version);
using PFN_cuDeviceGetCount = CUresult (*)(int* count);
using PFN_cuDeviceGet = CUresult (*)(CUdevice* device, int ordinal);
using PFN_cuDeviceGetAttribute = CUresult (*)(int* value, CUdevice_attribute attribute, CUdevice device);
using PFN_cuDeviceGetName = CUresult (*)(char* name, int length, CUdevice device);
using PFN_cuDeviceCanAccessPeer = CUresult (*)(int* can, CUdevice device, CUdevice peer);
using PFN_cuDevicePrimaryCtxRetain = CUresult (*)(CUcontext* context, CUdevice device);
using PFN_cuCtxGetCurrent = CUresult (*)(CUcontext* context);
using PFN_cuCtxSetCurrent = CUresult (*)(CUcontext context);
using PFN_cuCtxEnablePeerAccess = CUresult (*)(CUcontext peer, unsigned int flags);
using PFN_cuModuleLoadData = CUresult (*)(CUmodule* module, const void* image);
using PFN_cuModuleGetFunction = CUresult (*)(CUfunction* function, CUmodule module, const char* name);
using PFN_cuFuncSetAttribute = CUresult (*)(CUfunction function, CUfunction_attribute attribute, int value);
using PFN_cuFuncGetAttribute = CUresult (*)(int* value, CUfunction_attribute attribute, CUfunction function);
using PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor = CUresult (*)(int* blocks, CUfunction function,
                                                                    int block_threads, size_t shared_bytes);
using PFN_cuLaunchKernel = CUresult (*)(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                                        unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                                        unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                                        void** kernel_params, void** extra);
using PFN_cuMemAlloc = CUresult (*)(CUdeviceptr* pointer, size_t bytes);                    // _v2
using PFN_cuMemFree = CUresult (*)(CUdeviceptr pointer);                                    // _v2
using PFN_cuMemHostAlloc = CUresult (*)(void** pointer, size_t bytes, unsigned int flags);
using PFN_cuMemFreeHost = CUresult (*)(void* pointer);
using PFN_cuMemcpyHtoDAsync = CUresult (*)(CUdeviceptr dst, const void* src, size_t bytes,  // _v2
                                           CUstream stream);
using PFN_cuMemcpyDtoHAsync = CUresult (*)(void* dst, CUdeviceptr src, size_t bytes,        // _v2
                                           CUstream stream);
using PFN_cuMemcpyPeerAsync = CUresult (*)(CUdeviceptr dst, CUcontext dst_context, CUdeviceptr src,
                                           CUcontext src_context, size_t bytes, CUstream stream);
using PFN_cuMemsetD8Async = CUresult (*)(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream);
using PFN_cuStreamCreate = CUresult (*)(CUstream* stream, unsigned int flags);
using PFN_cuStreamSynchronize = CUresult (*)(CUstream stream);
using PFN_cuStreamQuery = CUresult (*)(CUstream stream);
using PFN_cuStreamDestroy = CUresult (*)(CUstream stream);  // _v2
using PFN_cuStreamWaitEvent = CUresult (*)(CUstream stream, CUevent event, unsigned int flags);
using PFN_cuStreamWriteValue64 = CUresult (*)(CUstream stream, CUdeviceptr address, unsigned long long value,  // _v2
                                              unsigned int flags);
using PFN_cuStreamWaitValue64 = CUresult (*)(CUstream stream, CUdeviceptr address, unsigned long long value,  // _v2
                                             unsigned int flags);
using PFN_cuEventCreate = CUresult (*)(CUevent* event, unsigned int flags);
using PFN_cuEventRecord = CUresult (*)(CUevent event, CUstream stream);
using PFN_cuEventSynchronize = CUresult (*)(CUevent event);
using PFN_cuEventQuery = CUresult (*)(CUevent event);
using PFN_cuEventDestroy = CUresult (*)(CUevent event);  // _v2
using PFN_cuPointerGetAttribute = CUresult (*)(void* data, CUpointer_attribute attribute, CUdeviceptr pointer);
using PFN_cuMemGetAddressRange = CUresult (*)(CUdeviceptr* base, size_t* bytes, CUdeviceptr pointer);  // _v2
using PFN_cuIpcGetMemHandle = CUresult (*)(CUipcMemHandle* handle, CUdeviceptr pointer);
using PFN_cuIpcOpenMemHandle = CUresult (*)(CUdeviceptr* pointer, CUipcMemHandle handle, unsigned int flags);  // _v2
using PFN_cuIpcCloseMemHandle = CUresult (*)(CUdeviceptr pointer);
using PFN_cuGetErrorName = CUresult (*)(CUresult error, const char** name);
using PFN_cuGetErrorString = CUresult (*)(CUresult error, const char** description);

// ---- NVRTC (nvrtc.h) --------------------------------------------------------------------

typedef enum {
  NVRTC_SUCCESS = 0,
  NVRTC_ERROR_OUT_OF_MEMORY = 1,
  NVRTC_ERROR_PROGRAM_CREATION_FAILURE = 2,
  NVRTC_ERROR_INVALID_INPUT = 3,
  NVRTC_ERROR_INVALID_PROGRAM = 4,
  NVRTC_ERROR_INVALID_OPTION = 5,
  NVRTC_ERROR_COMPILATION = 6,
  NVRTC_ERROR_BUILTIN_OPERATION_FAILURE = 7,
  NVRTC_ERROR_INTERNAL_ERROR = 11,
  NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED = 17,
} nvrtcResult;

typedef struct _nvrtcProgram* nvrtcProgram;

using PFN_nvrtcGetErrorString = const char* (*)(nvrtcResult result);
using PFN_nvrtcVersion = nvrtcResult (*)(int* major, int* minor);
using PFN_nvrtcGetNumSupportedArchs = nvrtcResult (*)(int* count);
using PFN_nvrtcGetSupportedArchs = nvrtcResult (*)(int* archs);
using PFN_nvrtcCreateProgram = nvrtcResult (*)(nvrtcProgram* program, const char* source, const char* name,
                                               int header_count, const char* const* headers,
                                               const char* const* include_names);
using PFN_nvrtcDestroyProgram = nvrtcResult (*)(nvrtcProgram* program);
using PFN_nvrtcCompileProgram = nvrtcResult (*)(nvrtcProgram program, int option_count,
                                                const char* const* options);
using PFN_nvrtcGetPTXSize = nvrtcResult (*)(nvrtcProgram program, size_t* bytes);
using PFN_nvrtcGetPTX = nvrtcResult (*)(nvrtcProgram program, char* ptx);
using PFN_nvrtcGetCUBINSize = nvrtcResult (*)(nvrtcProgram program, size_t* bytes);
using PFN_nvrtcGetCUBIN = nvrtcResult (*)(nvrtcProgram program, char* cubin);
using PFN_nvrtcGetProgramLogSize = nvrtcResult (*)(nvrtcProgram program, size_t* bytes);
using PFN_nvrtcGetProgramLog = nvrtcResult (*)(nvrtcProgram program, char* log);

}  // namespace tp::cuda
