"""The errors a collective across processes raises when a rank fails it."""

__all__ = ["CommError", "CommTimeout"]


class CommError(RuntimeError):
    """A rank died, disagreed or broke the communicator; the call ended on this rank."""


class CommTimeout(CommError, TimeoutError):
    """A rank did not arrive within the timeout (it died, hangs or never called)."""
