"""Errors as Python exceptions, one class per status code.

Every error the coordinator, a worker or the C++ core reports reaches Python as a subclass of
:class:`MeshrtError` carrying the server's message unchanged (it names the tensor, dim, op, worker or
step that is wrong)::

    try:
        session.run({"x": x})
    except meshrt.InvalidArgumentError as e:
        print(e.message)     # "feed 'x': shape [batch:8,d:3] does not match ..."

The codes are gRPC's (which are absl::Status's): ``e.code`` is the number, ``e.code_name`` its name.
"""

_NAMES = {
    1: "CANCELLED",
    2: "UNKNOWN",
    3: "INVALID_ARGUMENT",
    4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND",
    6: "ALREADY_EXISTS",
    7: "PERMISSION_DENIED",
    8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION",
    10: "ABORTED",
    11: "OUT_OF_RANGE",
    12: "UNIMPLEMENTED",
    13: "INTERNAL",
    14: "UNAVAILABLE",
    15: "DATA_LOSS",
    16: "UNAUTHENTICATED",
}


class MeshrtError(Exception):
    """An error of meshrt: ``code`` (int), ``code_name`` (e.g. "INVALID_ARGUMENT"), ``message``."""

    code = 2

    def __init__(self, message, code=None):
        if code is not None:
            self.code = code
        self.message = message
        super().__init__(message)

    @property
    def code_name(self):
        """The status code's name, e.g. "NOT_FOUND"."""
        return _NAMES.get(self.code, str(self.code))

    def __str__(self):
        return f"{self.code_name}: {self.message}"


class CancelledError(MeshrtError):
    """The call was cancelled."""
    code = 1


class UnknownError(MeshrtError):
    """An error without a more precise code."""
    code = 2


class InvalidArgumentError(MeshrtError, ValueError):
    """Bad input: a graph, shape, layout, feed or option that cannot be right (names what)."""
    code = 3


class DeadlineExceededError(MeshrtError, TimeoutError):
    """A wait ran out of time (workers that did not come, a step longer than its timeout)."""
    code = 4


class NotFoundError(MeshrtError, LookupError):
    """Something named does not exist: a session, tensor, checkpoint or file."""
    code = 5


class AlreadyExistsError(MeshrtError):
    """Something to be made exists already."""
    code = 6


class PermissionDeniedError(MeshrtError, PermissionError):
    """The caller may not do this (another client's session, a path outside a root)."""
    code = 7


class ResourceExhaustedError(MeshrtError):
    """Too big: a request over a limit, a program over the memory limit."""
    code = 8


class FailedPreconditionError(MeshrtError):
    """Not now: e.g. a session that failed or expired, a save before the first step."""
    code = 9


class AbortedError(MeshrtError):
    """The operation was aborted (e.g. a step a failure cut short)."""
    code = 10


class OutOfRangeError(MeshrtError, IndexError):
    """A value past its valid range."""
    code = 11


class UnimplementedError(MeshrtError, NotImplementedError):
    """Not supported (e.g. an op without a gradient on the path to the loss)."""
    code = 12


class InternalError(MeshrtError):
    """A broken invariant inside meshrt: a bug, please report it."""
    code = 13


class UnavailableError(MeshrtError, ConnectionError):
    """The coordinator or a worker cannot be reached (or went away during the call)."""
    code = 14


class DataLossError(MeshrtError):
    """Data is corrupt (e.g. a checkpoint shard whose checksum does not match)."""
    code = 15


class UnauthenticatedError(MeshrtError):
    """No token, or a wrong one."""
    code = 16


_CLASSES = {c.code: c for c in (
    CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError, NotFoundError,
    AlreadyExistsError, PermissionDeniedError, ResourceExhaustedError, FailedPreconditionError,
    AbortedError, OutOfRangeError, UnimplementedError, InternalError, UnavailableError,
    DataLossError, UnauthenticatedError)}


def error(code, message):
    """The exception for status ``code`` (an int) with ``message``."""
    return _CLASSES.get(code, UnknownError)(message, code)


def from_rpc_error(e):
    """The :class:`MeshrtError` of a ``grpc.RpcError`` (its status code and details)."""
    code = e.code() if hasattr(e, "code") else None
    number = code.value[0] if code is not None else 2
    details = e.details() if hasattr(e, "details") else str(e)
    return error(number, details or str(e))


def check(result):
    """``(code, message, value)`` from meshrt._core -> value, or raises the code's exception."""
    code, message, value = result
    if code != 0:
        raise error(code, message)
    return value
