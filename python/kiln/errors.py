"""kiln's errors as Python exceptions. Every exception kiln raises is a kiln.Error; its
message is kiln's (it names the file, input or option at fault) and `code` the status
code's name ("INVALID_ARGUMENT", ...). The common codes also derive from the built-in
exception a Python caller would expect."""

from . import _lib


class Error(Exception):
    """A kiln failure: `code` is the status name, str(error) kiln's message."""

    code = "UNKNOWN"

    def __init__(self, message, code=None):
        super().__init__(message)
        if code is not None:
            self.code = code


class InvalidArgumentError(Error, ValueError):
    """Bad input: an option, a tensor's name, dtype or shape, a file that is no model."""
    code = "INVALID_ARGUMENT"


class NotFoundError(Error, FileNotFoundError):
    """No such file."""
    code = "NOT_FOUND"


class FailedPreconditionError(Error, RuntimeError):
    """No GPU, a bundle for another arch, a step without a GPU kernel."""
    code = "FAILED_PRECONDITION"


class ResourceExhaustedError(Error, MemoryError):
    """Out of (GPU) memory."""
    code = "RESOURCE_EXHAUSTED"


class UnimplementedError(Error, NotImplementedError):
    """An ONNX op or attribute kiln does not support."""
    code = "UNIMPLEMENTED"


_BY_CODE = {3: InvalidArgumentError, 5: NotFoundError, 8: ResourceExhaustedError, 9: FailedPreconditionError,
            12: UnimplementedError}


def check(status):
    """Raises the exception of a failed C API call (status != 0) with kiln's message."""
    if status == 0:
        return
    message = (_lib.lib.kiln_last_error() or b"").decode("utf-8", "replace")
    name = (_lib.lib.kiln_status_name(status) or b"UNKNOWN").decode()
    cls = _BY_CODE.get(status, Error)
    raise cls(message, code=name)
