"""kiln from Python: compile ONNX models into bundles and run them on the GPU or the
CPU backend, with numpy arrays or, without a copy, GPU tensors of any DLPack framework
(torch, cupy, ...). A thin layer over the C API (libkiln, include/kiln/kiln_c.h);
docs/python.md has the rest.

    import kiln, numpy as np
    model = kiln.compile("model.onnx", "model.kiln", precision="fp16")  # or kiln.load("model.kiln")
    session = model.session(device="gpu")
    outputs = session.run({"x": np.zeros((1, 3, 224, 224), np.float32)})  # {name: numpy.ndarray}
"""

import ast
import ctypes
import os
import shutil
import tempfile

import numpy as np

from . import _dlpack, _lib
from ._dlpack import GpuTensor
from .errors import (Error, FailedPreconditionError, InvalidArgumentError, NotFoundError, ResourceExhaustedError,
                     UnimplementedError, check)

__all__ = ["compile", "load", "gpu_available", "Model", "Session", "TensorInfo", "GpuTensor", "Error",
           "InvalidArgumentError", "NotFoundError", "FailedPreconditionError", "ResourceExhaustedError",
           "UnimplementedError"]

# Options of `kiln compile` that are on by default: False gives --no-NAME.
_NEGATABLE = {"fuse", "kernel_cache", "tuning_db"}


def gpu_available():
    """True when a CUDA GPU is usable by kiln."""
    return bool(_lib.lib.kiln_gpu_available())


def _compile_flags(options):
    """Keyword options as `kiln compile` flags (docs/cli.md): precision="fp32" ->
    --precision=fp32, fuse=False -> --no-fuse, tune=True -> --tune, dim={"batch": 8}
    -> --dim=batch=8, input_shape={"x": (1, 128)} -> --input-shape=x=1x128."""
    flags = []
    for key, value in options.items():
        name = key.replace("_", "-")
        if value is None:
            continue
        if isinstance(value, bool):
            if value and key not in _NEGATABLE:
                flags.append(f"--{name}")
            elif not value and key in _NEGATABLE:
                flags.append(f"--no-{name}")
            elif not value and key not in _NEGATABLE:
                pass  # tune=False and the like: the default
            continue
        if isinstance(value, dict):
            for k, v in value.items():
                v = "x".join(str(int(d)) for d in v) if isinstance(v, (tuple, list)) else v
                flags.append(f"--{name}={k}={v}")
            continue
        if isinstance(value, (list, tuple)):
            flags.extend(f"--{name}={v}" for v in value)
            continue
        flags.append(f"--{name}={value}")
    return flags


def compile(onnx_path, out_path=None, **options):  # noqa: A001 (kiln.compile, as the CLI's verb)
    """Compiles the ONNX model at `onnx_path` into a bundle at `out_path` and loads it.
    Options are those of `kiln compile` (docs/cli.md) as keywords: arch="sm_80",
    precision="fp16"|"bf16"|"fp32", fuse=False, dim={"batch": 8},
    input_shape={"x": (1, 3, 224, 224)}, layout="nhwc", matmul_groups="library",
    kernel_cache=False, tune=True, ... Needs no GPU. Without `out_path` the bundle
    lives in a temporary file, removed once loaded."""
    flags = [f.encode() for f in _compile_flags(options)]
    argv = (ctypes.c_char_p * len(flags))(*flags)
    tmpdir = None
    if out_path is None:
        tmpdir = tempfile.mkdtemp(prefix="kiln_")
        out_path = os.path.join(tmpdir, os.path.splitext(os.path.basename(str(onnx_path)))[0] + ".kiln")
    try:
        check(_lib.lib.kiln_compile(os.fsencode(onnx_path), os.fsencode(out_path), argv, len(flags)))
        return load(out_path)
    finally:
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)


def load(path):
    """Loads the bundle at `path` (a .kiln file from kiln.compile or `kiln compile`)."""
    handle = ctypes.c_void_p()
    check(_lib.lib.kiln_model_load(os.fsencode(path), ctypes.byref(handle)))
    return Model(handle)


class TensorInfo:
    """One input or output of a model: name, dtype ("float32", "float16", "bfloat16",
    "int64", "int32", "int8", "uint8", "bool") and shape (a tuple). A model compiled for
    dim ranges (dim={"seq": "1..512"}) also gives `dims`, each dim as an expression over
    Model.dim_ranges ("batch", "seq", "768"); `shape` is then the largest shape and
    `min_shape` the smallest. For a static model dims is None and min_shape == shape."""

    __slots__ = ("name", "dtype", "shape", "dims", "min_shape")

    def __init__(self, name, dtype, shape, dims=None, min_shape=None):
        self.name, self.dtype, self.shape = name, dtype, tuple(shape)
        self.dims = tuple(dims) if dims else None
        self.min_shape = tuple(min_shape) if min_shape is not None else self.shape

    def __repr__(self):
        dims = f", dims={self.dims}, min_shape={self.min_shape}" if self.dims else ""
        return f"TensorInfo(name={self.name!r}, dtype={self.dtype!r}, shape={self.shape}{dims})"

    def __eq__(self, other):
        return isinstance(other, TensorInfo) and (self.name, self.dtype, self.shape, self.dims) == (
            other.name, other.dtype, other.shape, other.dims)


def _signature(handle, count, get, get_dims):
    infos = []
    for i in range(count(handle)):
        c = _lib.TensorInfo()
        check(get(handle, i, ctypes.byref(c)))
        dims, min_shape = ctypes.POINTER(ctypes.c_char_p)(), ctypes.POINTER(ctypes.c_int64)()
        check(get_dims(handle, i, ctypes.byref(dims), ctypes.byref(min_shape)))
        names = [dims[d].decode() for d in range(c.ndim)] if dims else None
        infos.append(TensorInfo(c.name.decode(), _lib.DTYPES[c.dtype], [c.shape[d] for d in range(c.ndim)], names,
                                [min_shape[d] for d in range(c.ndim)]))
    return infos


def _dim_value(expr, values):
    """The value of a dim expression ("batch*seq + 1") for the named dims' `values`;
    None when it names a dim without a value."""
    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return values.get(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = walk(node.operand)
            return None if v is None else -v
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            a, b = walk(node.left), walk(node.right)
            if a is None or b is None:
                return None
            return a + b if isinstance(node.op, ast.Add) else a - b if isinstance(node.op, ast.Sub) else a * b
        raise ValueError(f"not a dim expression: {expr!r}")
    return walk(ast.parse(expr, mode="eval"))


class Model:
    """A loaded bundle: immutable, shared by any number of sessions (one copy of the
    weights). Create it with kiln.load or kiln.compile."""

    def __init__(self, handle):
        self._handle = handle
        lib = _lib.lib
        self.inputs = _signature(handle, lib.kiln_model_num_inputs, lib.kiln_model_input, lib.kiln_model_input_dims)
        self.outputs = _signature(handle, lib.kiln_model_num_outputs, lib.kiln_model_output,
                                  lib.kiln_model_output_dims)
        # {name: (min, max)} of the dims compiled for a range; {} for a static model.
        # {name: size} of those given a size to tune for (dim={"seq": "1..512:128"}).
        self.dim_ranges = {}
        self.dim_opts = {}
        for i in range(lib.kiln_model_num_dims(handle)):
            name, lo, hi, opt = ctypes.c_char_p(), ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
            check(lib.kiln_model_dim(handle, i, ctypes.byref(name), ctypes.byref(lo), ctypes.byref(hi)))
            check(lib.kiln_model_dim_opt(handle, i, ctypes.byref(opt)))
            self.dim_ranges[name.value.decode()] = (lo.value, hi.value)
            if opt.value > 0:
                self.dim_opts[name.value.decode()] = opt.value
        self.path = lib.kiln_model_path(handle).decode()
        self.arch = lib.kiln_model_arch(handle).decode()
        self.precision = lib.kiln_model_precision(handle).decode()
        self.weight_bytes = lib.kiln_model_weight_bytes(handle)
        self.arena_bytes = lib.kiln_model_arena_bytes(handle)

    def session(self, device="gpu", stream=None, cuda_graph=True, programmatic_launch=True):
        """A session on `device` ("gpu": the current CUDA device; "cpu": the CPU
        backend). `stream` (GPU only): a CUDA stream to launch on, as an integer handle
        or an object with .cuda_stream (torch.cuda.Stream); None: the session's own.
        `cuda_graph=False` launches kernel by kernel instead of replaying a CUDA graph;
        `programmatic_launch=False` starts each kernel only after the one before it has
        finished (no programmatic dependent launch)."""
        if device not in ("gpu", "cpu"):
            raise InvalidArgumentError(f"device must be 'gpu' or 'cpu', not {device!r}")
        if stream is not None and not isinstance(stream, int):
            stream = getattr(stream, "cuda_stream", stream)
        handle = ctypes.c_void_p()
        flags = (0 if cuda_graph else _lib.SESSION_NO_CUDA_GRAPH) | (
            0 if programmatic_launch else _lib.SESSION_NO_PROGRAMMATIC_LAUNCH)
        check(_lib.lib.kiln_session_create(self._handle, _lib.DEVICE_GPU if device == "gpu" else _lib.DEVICE_CPU,
                                           stream, flags, ctypes.byref(handle)))
        return Session(self, handle, device)

    def close(self):
        """Releases the model now (sessions keep it alive until they close)."""
        if getattr(self, "_handle", None):
            _lib.lib.kiln_model_free(self._handle)
            self._handle = None

    __del__ = close

    def __repr__(self):
        return (f"kiln.Model({self.path!r}, {self.arch}, {self.precision}, inputs={self.inputs}, "
                f"outputs={self.outputs})")


def _c_tensor(name, data, dtype, shape, device):
    dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    t = _lib.Tensor(name.encode(), data, _lib.DTYPES.index(dtype), len(shape), dims, device)
    return t, dims  # dims must outlive the call


def _numpy_dtype(dtype):
    """The numpy dtype of a kiln dtype; numpy has no bfloat16, so those are uint16 arrays
    of the bits."""
    return np.dtype(np.uint16) if dtype == "bfloat16" else np.dtype(dtype)


def _host_array(info, value):
    """`value` as a contiguous numpy array of the input's dtype (no copy when it is one)."""
    if _dlpack.is_dlpack(value) and _dlpack.device_of(value)[0] == _dlpack.KDL_CPU:
        value = np.from_dlpack(value)
    array = np.ascontiguousarray(value)
    if array.dtype != _numpy_dtype(info.dtype):
        raise InvalidArgumentError(f"input '{info.name}' must be {info.dtype}{list(info.shape)}, got "
                                   f"{array.dtype}{list(array.shape)} (convert with .astype('{info.dtype}'))")
    return array


class Session:
    """Runs a model with an activation arena of its own. One call at a time (calls
    from several threads are serialised): use one session per thread."""

    def __init__(self, model, handle, device):
        self.model = model
        self.device = device
        self._handle = handle

    @property
    def stream(self):
        """The CUDA stream (an integer handle) a GPU session launches on; None on the CPU."""
        return _lib.lib.kiln_session_stream(self._handle)

    def run(self, inputs, outputs=None):
        """Runs the model on `inputs` ({name: array}, every input once, exact dtype and
        shape) and returns {name: output}.

        numpy arrays (or host tensors) in: numpy arrays out, on either device (bfloat16
        tensors travel as uint16 arrays of their bits). GPU tensors in (anything with
        __dlpack__ on the CUDA device; a GPU session only): the run reads them where
        they are and returns torch tensors when the inputs are torch tensors, else
        kiln.GpuTensor objects (torch.from_dlpack takes either without a copy).
        `outputs` ({name: buffer}) gives buffers to write instead, of the same kind as
        the inputs; only those outputs are returned."""
        if not isinstance(inputs, dict):
            raise InvalidArgumentError("run takes a dict {input name: array}")
        on_gpu = [name for name, v in inputs.items()
                  if _dlpack.is_dlpack(v) and _dlpack.device_of(v)[0] == _dlpack.KDL_CUDA]
        if on_gpu and len(on_gpu) != len(inputs):
            raise InvalidArgumentError(f"inputs {sorted(on_gpu)} are in GPU memory, the others in host memory: "
                                       f"a call takes all of its inputs in one kind of memory")
        if on_gpu:
            return self._run_gpu(inputs, outputs)
        return self._run_host(inputs, outputs)

    def _infos(self, names, signature, what):
        by_name = {t.name: t for t in signature}
        for name in names:
            if name not in by_name:
                raise InvalidArgumentError(f"{self.model.path}: unknown {what} '{name}'; the model's {what}s are: "
                                           + ", ".join(f"{t.name}: {t.dtype}{list(t.shape)}" for t in signature))
        return by_name

    def _output_shape(self, info, inputs):
        """The shape of output `info` for these inputs: its dims evaluated at the sizes
        the inputs give a dynamic model (the largest shape where they give none: the run
        then says why)."""
        if not info.dims:
            return info.shape
        values = {}
        for t in self.model.inputs:
            shape = getattr(inputs.get(t.name), "shape", None)
            if t.dims and shape is not None and len(shape) == len(t.dims):
                values.update((e, int(d)) for e, d in zip(t.dims, shape) if e.isidentifier())
        shape = tuple(_dim_value(e, values) for e in info.dims)
        return info.shape if None in shape else shape

    def _call(self, c_inputs, c_outputs):
        ins = (_lib.Tensor * len(c_inputs))(*c_inputs)
        outs = (_lib.Tensor * len(c_outputs))(*c_outputs)
        check(_lib.lib.kiln_session_run(self._handle, ins, len(c_inputs), outs, len(c_outputs)))

    def _run_host(self, inputs, outputs):
        infos = self._infos(inputs, self.model.inputs, "input")
        keep, c_inputs = [], []
        for name, value in inputs.items():
            array = _host_array(infos[name], value)
            t, dims = _c_tensor(name, array.ctypes.data, infos[name].dtype, array.shape, _lib.DEVICE_CPU)
            keep += [array, dims]
            c_inputs.append(t)
        if outputs is None:
            outputs = {o.name: np.empty(self._output_shape(o, inputs), dtype=_numpy_dtype(o.dtype))
                       for o in self.model.outputs}
        out_infos = self._infos(outputs, self.model.outputs, "output")
        c_outputs = []
        for name, array in outputs.items():
            info = out_infos[name]
            if not isinstance(array, np.ndarray) or not array.flags.c_contiguous or not array.flags.writeable:
                raise InvalidArgumentError(f"output buffer '{name}' must be a writable C-contiguous numpy array")
            if array.dtype != _numpy_dtype(info.dtype):
                raise InvalidArgumentError(f"output buffer '{name}' must be {info.dtype}{list(info.shape)}, got "
                                           f"{array.dtype}{list(array.shape)}")
            t, dims = _c_tensor(name, array.ctypes.data, info.dtype, array.shape, _lib.DEVICE_CPU)
            keep.append(dims)
            c_outputs.append(t)
        self._call(c_inputs, c_outputs)
        return outputs

    def _run_gpu(self, inputs, outputs):
        if self.device != "gpu":
            raise InvalidArgumentError("a CPU session takes host arrays; these inputs are in GPU memory "
                                       "(create the session with device='gpu', or pass .cpu() tensors)")
        self._infos(inputs, self.model.inputs, "input")  # unknown names
        device = ctypes.c_int32()
        check(_lib.lib.kiln_gpu_device(ctypes.byref(device)))
        stream = self.stream
        borrowed, keep, c_inputs = [], [], []

        def borrow(name, value, what):
            # __dlpack__(stream=...) makes the session's stream wait for the producer's work.
            b = _dlpack.Borrowed(value, stream, f"{what} '{name}'")
            if b.device_type != _dlpack.KDL_CUDA or b.device_id != device.value:
                raise InvalidArgumentError(f"{what} '{name}' is on device {(b.device_type, b.device_id)}, the "
                                           f"session runs on cuda:{device.value}")
            borrowed.append(b)
            return b

        for name, value in inputs.items():
            b = borrow(name, value, "input")
            t, dims = _c_tensor(name, b.data, b.dtype, b.shape, _lib.DEVICE_GPU)
            keep.append(dims)
            c_inputs.append(t)
        if outputs is None:
            outputs = self._gpu_outputs(next(iter(inputs.values())))
        self._infos(outputs, self.model.outputs, "output")
        c_outputs = []
        for name, value in outputs.items():
            if not isinstance(value, GpuTensor) and not (_dlpack.is_dlpack(value) and
                                                         _dlpack.device_of(value)[0] == _dlpack.KDL_CUDA):
                raise InvalidArgumentError(f"output buffer '{name}' is not in GPU memory: a call with GPU "
                                           f"inputs writes GPU buffers (torch CUDA tensors, kiln.GpuTensor, ...)")
            b = borrow(name, value, "output buffer") if not isinstance(value, GpuTensor) else None
            data, dtype, shape = (b.data, b.dtype, b.shape) if b else (value.data_ptr, value.dtype, value.shape)
            t, dims = _c_tensor(name, data, dtype, shape, _lib.DEVICE_GPU)
            keep.append(dims)
            c_outputs.append(t)
        self._call(c_inputs, c_outputs)
        return outputs

    def _gpu_outputs(self, like):
        """Output buffers in the inputs' framework: torch tensors (torch's allocator) for
        torch inputs, else GpuTensors."""
        if type(like).__module__.startswith("torch"):
            import torch
            return {o.name: torch.empty(o.shape, dtype=getattr(torch, o.dtype), device=like.device)
                    for o in self.model.outputs}
        return {o.name: GpuTensor(o.shape, o.dtype) for o in self.model.outputs}

    def close(self):
        """Releases the session's arena now."""
        if getattr(self, "_handle", None):
            _lib.lib.kiln_session_free(self._handle)
            self._handle = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"kiln.Session({self.model.path!r}, device={self.device!r})"
