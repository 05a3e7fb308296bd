"""How the ranks' data meets across processes, one module per transport: ShmTransport ('shm',
shared memory, cpu), IpcTransport ('cuda_ipc', CUDA IPC on one host), NcclTransport ('nccl',
NCCL, across hosts too); the interface they share is transport.py's."""
from .ipc import IpcTransport
from .nccl import NcclTransport
from .shm import ShmTransport
from .transport import Transport

__all__ = ["TRANSPORTS", "Transport", "ShmTransport", "IpcTransport", "NcclTransport"]

# By the name tp.comm.init(transport=...) takes, in the order its error lists them.
TRANSPORTS = {t.name: t for t in (ShmTransport, IpcTransport, NcclTransport)}
