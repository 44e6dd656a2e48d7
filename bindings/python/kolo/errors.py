"""kolo's Python exceptions: one class per kolo::Error code (docs/errors.md, docs/python.md).

Every class derives from KoloError (a RuntimeError). Argument errors are also ValueErrors. A
failed collective (mismatch, lost peer, timeout, I/O) is also a HorovodInternalError, the class
Horovod users catch to recover from a lost rank; kolo.torch exports the same class.
"""


class HorovodInternalError(RuntimeError):
    """An internal error in a collective: a rank was lost or the ranks disagreed (Horovod's
    horovod.common.exceptions.HorovodInternalError)."""


class KoloError(RuntimeError):
    """Base of kolo's errors; `code` names the kolo error code ("mismatch", "timeout", ...)."""
    code = "internal"


class InvalidArgumentError(KoloError, ValueError):
    """A bad argument, option or environment value: fix the call."""
    code = "invalid argument"


class MismatchError(KoloError, HorovodInternalError):
    """Ranks disagree about a collective (name, dtype, shape, op, root, ...)."""
    code = "mismatch"


class PeerLostError(KoloError, HorovodInternalError):
    """A peer died, closed its connection, shut its engine down or aborted."""
    code = "peer lost"


class TimeoutError(KoloError, HorovodInternalError):  # noqa: A001 (like asyncio.TimeoutError)
    """A wait went KOLO_TIMEOUT_SECONDS without progress, or a stalled tensor was failed after
    KOLO_STALL_SHUTDOWN_SECONDS."""
    code = "timeout"


class IoError(KoloError, HorovodInternalError):
    """A system call, socket or shared-memory failure."""
    code = "io"


class AuthError(KoloError):
    """A handshake with a wrong job secret or protocol version."""
    code = "authentication"


class InternalError(KoloError, HorovodInternalError):
    """A broken invariant inside kolo: a bug, please report it."""
    code = "internal"


_BY_CODE = {cls.code: cls for cls in (InvalidArgumentError, MismatchError, PeerLostError,
                                      TimeoutError, IoError, AuthError, InternalError)}


def error_class(code):
    """The exception class for a kolo error code name (what kolo._core raises)."""
    return _BY_CODE.get(code, KoloError)
