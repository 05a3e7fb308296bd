// The part of NCCL's C ABI that tileprim calls (nccl.h's names and values, declared here so that
// building tileprim needs no NCCL headers and importing it needs no NCCL library).
#pragma once
#include <cstddef>

#include "backends/cuda/cuda_api.h"  // CUstream (NCCL's cudaStream_t is the same handle)

extern "C" {
typedef struct ncclComm* ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef enum { ncclSuccess = 0, ncclInProgress = 7 } ncclResult_t;
typedef enum { ncclInt8 = 0 } ncclDataType_t;  // bytes: tileprim moves packed bytes only

typedef const char* (*PFN_ncclGetErrorString)(ncclResult_t);
typedef const char* (*PFN_ncclGetLastError)(ncclComm_t);
typedef ncclResult_t (*PFN_ncclGetVersion)(int*);
typedef ncclResult_t (*PFN_ncclGetUniqueId)(ncclUniqueId*);
// The head of nccl.h's ncclConfig_t, as NCCL 2.18 made it: NCCL reads `size` bytes of it and keeps
// its own defaults for the fields of later versions (and for those given as kNcclUndefined).
typedef struct {
  size_t size;
  unsigned int magic;    // 0xcafebeef
  unsigned int version;  // NCCL_VERSION(2, 18, 0)
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;  // a communicator split off this one shares its connections
} ncclConfig_t;
#define TP_NCCL_UNDEFINED (-2147483647 - 1)  // NCCL_CONFIG_UNDEF_INT
typedef ncclResult_t (*PFN_ncclCommInitRankConfig)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*);
typedef ncclResult_t (*PFN_ncclCommDestroy)(ncclComm_t);
typedef ncclResult_t (*PFN_ncclCommAbort)(ncclComm_t);
typedef ncclResult_t (*PFN_ncclCommGetAsyncError)(ncclComm_t, ncclResult_t*);
typedef ncclResult_t (*PFN_ncclGroupStart)();
typedef ncclResult_t (*PFN_ncclGroupEnd)();
typedef ncclResult_t (*PFN_ncclSend)(const void*, size_t, ncclDataType_t, int, ncclComm_t, tp::cuda::CUstream);
typedef ncclResult_t (*PFN_ncclRecv)(void*, size_t, ncclDataType_t, int, ncclComm_t, tp::cuda::CUstream);
}
