"""The errors a collective across processes raises when a rank fails it."""

__all__ = ["CommError", "CommTimeout", "CallTypeError"]


class CommError(RuntimeError):
    """A rank died, disagreed or broke the communicator; the call ended on this rank."""


class CommTimeout(CommError, TimeoutError):
    """A rank did not arrive within the timeout (it died, hangs or never called)."""


class CallTypeError(ValueError, TypeError):
    """A call across processes that a rank's own checks refused with a TypeError (a tensor of a
    dtype treduce does not take, say): every rank raises this one error, naming that rank, so
    ``except ValueError`` catches it on every rank and ``except TypeError`` too."""
