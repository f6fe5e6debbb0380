"""DLPack (https://dmlc.github.io/dlpack/) both ways, with ctypes: reading the tensors
a framework hands over through __dlpack__, and GpuTensor, kiln-owned GPU memory that a
framework takes without a copy (torch.from_dlpack)."""

import ctypes

import numpy as np

from . import _lib
from .errors import InvalidArgumentError, check

KDL_CPU, KDL_CUDA = 1, 2
_DLTENSOR = b"dltensor"  # the capsule's name; kept alive with the module


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


# (code, bits) -> kiln dtype name; kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6.
_FROM_DL = {(2, 32): "float32", (2, 16): "float16", (4, 16): "bfloat16", (0, 64): "int64", (0, 32): "int32",
            (0, 8): "int8", (1, 8): "uint8", (6, 8): "bool", (1, 1): "bool"}

_api = ctypes.pythonapi
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

# The capsule's destructor: a tensor no consumer took (the capsule still named
# "dltensor") is deleted, which frees its GPU memory. It gets the dying capsule as a
# raw pointer and must not make a Python reference to it, hence these prototypes.
_Destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))


@_Destructor
def _destroy_capsule(capsule):
    if _raw_is_valid(capsule, _DLTENSOR):
        _lib.lib.kiln_dlpack_delete(_raw_get_pointer(capsule, _DLTENSOR))


def is_dlpack(value):
    return hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__") and not isinstance(value, np.ndarray)


def device_of(value):
    """(DLPack device type, id) of a DLPack-capable value."""
    device_type, device_id = value.__dlpack_device__()
    return int(device_type), int(device_id)


class Borrowed:
    """A tensor read through __dlpack__: its data pointer, dtype and shape. Holds the
    capsule (and so the memory) until released."""

    def __init__(self, value, stream, what):
        self.capsule = value.__dlpack__(stream=stream) if stream is not None else value.__dlpack__()
        address = _api.PyCapsule_GetPointer(self.capsule, _DLTENSOR)
        t = _DLManagedTensor.from_address(address).dl_tensor
        self.device_type, self.device_id = t.device.device_type, t.device.device_id
        self.shape = tuple(t.shape[i] for i in range(t.ndim))
        key = (t.dtype.code, t.dtype.bits)
        if t.dtype.lanes != 1 or key not in _FROM_DL:
            raise InvalidArgumentError(f"{what}: DLPack dtype (code {t.dtype.code}, {t.dtype.bits} bits, "
                                       f"{t.dtype.lanes} lanes) is none of kiln's: {', '.join(_lib.DTYPES)}")
        self.dtype = _FROM_DL[key]
        if t.strides:
            expected = 1
            for i in reversed(range(t.ndim)):
                if self.shape[i] != 1 and t.strides[i] != expected:
                    raise InvalidArgumentError(f"{what}: not contiguous (strides "
                                               f"{tuple(t.strides[j] for j in range(t.ndim))}); pass "
                                               f"x.contiguous()")
                expected *= self.shape[i]
        self.data = (t.data or 0) + t.byte_offset


def _itemsize(dtype):
    return 1 if dtype == "bool" else (2 if dtype == "bfloat16" else np.dtype(dtype).itemsize)


class GpuTensor:
    """A dense tensor in GPU memory that kiln allocated, such as an output of a GPU
    session run on GPU inputs that are not torch tensors. Hand it to a framework
    without a copy with torch.from_dlpack(t) (which takes the memory over: t is empty
    afterwards), or copy it to the host with t.numpy()."""

    def __init__(self, shape, dtype):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * _itemsize(dtype)
        ptr = ctypes.c_void_p()
        check(_lib.lib.kiln_gpu_alloc(self.nbytes, ctypes.byref(ptr)))
        self._ptr = ptr.value
        device = ctypes.c_int32()
        check(_lib.lib.kiln_gpu_device(ctypes.byref(device)))
        self.device_id = device.value

    @classmethod
    def from_numpy(cls, array):
        """A GPU copy of a numpy array."""
        array = np.ascontiguousarray(array)
        t = cls(array.shape, str(array.dtype))
        check(_lib.lib.kiln_gpu_copy(t.data_ptr, _lib.DEVICE_GPU, array.ctypes.data, _lib.DEVICE_CPU, t.nbytes))
        return t

    @property
    def data_ptr(self):
        if self._ptr is None:
            raise InvalidArgumentError("this GpuTensor was handed over through __dlpack__ and holds nothing")
        return self._ptr

    def numpy(self):
        """A host copy (numpy has no bfloat16: those come as uint16 bit patterns)."""
        dtype = np.uint16 if self.dtype == "bfloat16" else np.dtype(self.dtype)
        out = np.empty(self.shape, dtype=dtype)
        check(_lib.lib.kiln_gpu_copy(out.ctypes.data, _lib.DEVICE_CPU, self.data_ptr, _lib.DEVICE_GPU, self.nbytes))
        return out

    def __dlpack_device__(self):
        return (KDL_CUDA, self.device_id)

    def __dlpack__(self, *, stream=None):
        # kiln's runs have finished by the time a GpuTensor is returned: the data is
        # ready on any stream, so `stream` asks for nothing.
        shape = (ctypes.c_int64 * len(self.shape))(*self.shape)
        managed = ctypes.c_void_p()
        check(_lib.lib.kiln_dlpack_from_gpu(self.data_ptr, _lib.DTYPES.index(self.dtype), len(self.shape), shape,
                                            ctypes.byref(managed)))
        self._ptr = None  # the capsule owns the memory now
        return _api.PyCapsule_New(managed.value, _DLTENSOR, ctypes.cast(_destroy_capsule, ctypes.c_void_p))

    def __del__(self):
        if getattr(self, "_ptr", None) is not None and _lib is not None and _lib.lib is not None:
            _lib.lib.kiln_gpu_free(self._ptr)
            self._ptr = None

    def __repr__(self):
        return f"GpuTensor(shape={self.shape}, dtype={self.dtype}, device=cuda:{self.device_id})"
