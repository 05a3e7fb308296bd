"""The per-call meeting of ranks on several hosts, where no memory is shared: through the
bootstrap's all_gather (the engine the program already runs). Two exchanges per call: every
rank's description (every rank reads them all), then, once they agree, the root's verdict. The
'nccl' transport releases sources in stream order, so there is no third."""
from __future__ import annotations

from typing import List

from .bootstrap import Bootstrap

__all__ = ["HostsRendezvous"]


class HostsRendezvous:
    """The shared-memory Rendezvous's calls, each rank's in the same order, as collectives."""

    def __init__(self, bootstrap: Bootstrap, rank: int, timeout: float):
        self.bootstrap, self.rank, self.timeout = bootstrap, rank, timeout
        self.posted = b""

    def post(self, epoch: int, description: bytes) -> None:
        self.posted = description

    def descriptions(self, epoch: int, timeout: float, label: str) -> List[bytes]:
        return self.bootstrap.all_gather(self.posted, timeout)

    def publish_verdict(self, epoch: int, verdict: str) -> None:
        self.bootstrap.all_gather(verdict.encode(), self.timeout)

    def verdict(self, root: int, epoch: int, timeout: float, label: str) -> str:
        return self.bootstrap.all_gather(b"", timeout)[root].decode()

    def release(self, epoch: int) -> None:
        pass

    def wait_released(self, root: int, epoch: int, timeout: float, label: str) -> None:
        pass

    def exited(self) -> List[int]:
        """Processes on other hosts cannot be seen from here (NCCL reports their loss)."""
        return []
