"""Loads libkiln (the C API, include/kiln/kiln_c.h) and declares its functions."""

import ctypes
import ctypes.util
import os
from pathlib import Path

# kiln_c.h's enums.
DTYPES = ("float32", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool")
DEVICE_CPU, DEVICE_GPU = 0, 1
SESSION_NO_CUDA_GRAPH = 1
SESSION_NO_PROGRAMMATIC_LAUNCH = 2
API_VERSION = 1


class TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64))]


class Tensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("data", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("ndim", ctypes.c_int32), ("shape", ctypes.POINTER(ctypes.c_int64)), ("device", ctypes.c_int)]


def _candidates():
    """Where libkiln may be, in order: $KILN_LIBRARY, the build directory of the checkout
    this package sits in ($KILN_BUILD_DIR, else build/), then the loader's search path."""
    if os.environ.get("KILN_LIBRARY"):
        yield os.environ["KILN_LIBRARY"]
        return
    repo = Path(__file__).resolve().parent.parent.parent
    yield str(repo / os.environ.get("KILN_BUILD_DIR", "build") / "capi" / "libkiln.so")  # an absolute one replaces repo
    found = ctypes.util.find_library("kiln")
    yield found or "libkiln.so"


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (no such file)")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError("kiln: cannot load libkiln, the C API library. Build it with `bash scripts/build.sh` "
                      "(it lands in build/capi/libkiln.so) or point KILN_LIBRARY at it. Tried: " + "; ".join(tried))


lib = _load()

_STATUS = ctypes.c_int
_P = ctypes.c_void_p
_SIGNATURES = {
    "kiln_api_version": (ctypes.c_int32, []),
    "kiln_last_error": (ctypes.c_char_p, []),
    "kiln_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "kiln_compile": (_STATUS, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t]),
    "kiln_model_load": (_STATUS, [ctypes.c_char_p, ctypes.POINTER(_P)]),
    "kiln_model_free": (None, [_P]),
    "kiln_model_num_inputs": (ctypes.c_size_t, [_P]),
    "kiln_model_num_outputs": (ctypes.c_size_t, [_P]),
    "kiln_model_input": (_STATUS, [_P, ctypes.c_size_t, ctypes.POINTER(TensorInfo)]),
    "kiln_model_output": (_STATUS, [_P, ctypes.c_size_t, ctypes.POINTER(TensorInfo)]),
    "kiln_model_path": (ctypes.c_char_p, [_P]),
    "kiln_model_arch": (ctypes.c_char_p, [_P]),
    "kiln_model_precision": (ctypes.c_char_p, [_P]),
    "kiln_model_weight_bytes": (ctypes.c_int64, [_P]),
    "kiln_model_arena_bytes": (ctypes.c_int64, [_P]),
    "kiln_model_num_dims": (ctypes.c_size_t, [_P]),
    "kiln_model_dim": (_STATUS, [_P, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int64),
                                 ctypes.POINTER(ctypes.c_int64)]),
    "kiln_model_dim_opt": (_STATUS, [_P, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int64)]),
    "kiln_model_input_dims": (_STATUS, [_P, ctypes.c_size_t, ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p)),
                                        ctypes.POINTER(ctypes.POINTER(ctypes.c_int64))]),
    "kiln_model_output_dims": (_STATUS, [_P, ctypes.c_size_t, ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p)),
                                         ctypes.POINTER(ctypes.POINTER(ctypes.c_int64))]),
    "kiln_session_create": (_STATUS, [_P, ctypes.c_int, _P, ctypes.c_uint32, ctypes.POINTER(_P)]),
    "kiln_session_free": (None, [_P]),
    "kiln_session_device": (ctypes.c_int, [_P]),
    "kiln_session_stream": (_P, [_P]),
    "kiln_session_run": (_STATUS, [_P, ctypes.POINTER(Tensor), ctypes.c_size_t, ctypes.POINTER(Tensor),
                                   ctypes.c_size_t]),
    "kiln_gpu_available": (ctypes.c_int32, []),
    "kiln_gpu_device": (_STATUS, [ctypes.POINTER(ctypes.c_int32)]),
    "kiln_gpu_alloc": (_STATUS, [ctypes.c_size_t, ctypes.POINTER(_P)]),
    "kiln_gpu_free": (None, [_P]),
    "kiln_gpu_copy": (_STATUS, [_P, ctypes.c_int, _P, ctypes.c_int, ctypes.c_size_t]),
    "kiln_dlpack_from_gpu": (_STATUS, [_P, ctypes.c_int, ctypes.c_int32, ctypes.POINTER(ctypes.c_int64),
                                       ctypes.POINTER(_P)]),
    "kiln_dlpack_delete": (None, [_P]),
}
for _name, (_restype, _argtypes) in _SIGNATURES.items():
    _f = getattr(lib, _name)
    _f.restype = _restype
    _f.argtypes = _argtypes

if lib.kiln_api_version() != API_VERSION:
    raise ImportError(f"kiln: libkiln speaks C API version {lib.kiln_api_version()}, this package "
                      f"{API_VERSION}: rebuild the library or use the package of its checkout")
