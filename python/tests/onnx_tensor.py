"""Reads an ONNX TensorProto file (the zoo's input_K.pb / output_K.pb) into a numpy
array, without the onnx package: a few protobuf wire-format fields suffice."""

import numpy as np

# TensorProto.DataType -> numpy dtype (bfloat16 as its uint16 bits).
_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16,
           11: np.float64, 16: np.uint16}


def _varint(buf, pos):
    value, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def _fields(buf):
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def _packed_varints(value):
    out, pos = [], 0
    while pos < len(value):
        v, pos = _varint(value, pos)
        out.append(v - (1 << 64) if v >= 1 << 63 else v)
    return out


def read_tensor(path):
    """(name, array) of the TensorProto in `path`."""
    buf = open(path, "rb").read()
    dims, dtype, name, raw = [], 1, "", None
    floats, int32s, int64s = [], [], []
    for number, wire, value in _fields(buf):
        if number == 1:
            dims += _packed_varints(value) if wire == 2 else [value]
        elif number == 2:
            dtype = value
        elif number == 8:
            name = value.decode()
        elif number == 9:
            raw = value
        elif number == 4:
            floats += list(np.frombuffer(value, np.float32)) if wire == 2 else [np.frombuffer(value, np.float32)[0]]
        elif number == 5:
            int32s += _packed_varints(value) if wire == 2 else [value]
        elif number == 7:
            int64s += _packed_varints(value) if wire == 2 else [value]
    np_dtype = _DTYPES[dtype]
    if raw is not None:
        array = np.frombuffer(raw, dtype=np_dtype).copy()
    elif floats:
        array = np.array(floats, dtype=np_dtype)
    elif int64s:
        array = np.array(int64s, dtype=np_dtype)
    else:
        array = np.array(int32s, dtype=np.int32).astype(np_dtype)
    return name, array.reshape(dims)
