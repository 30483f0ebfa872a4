"""numpy arrays <-> meshrt.v1.TensorValue (float32 and int32, little-endian raw bytes)."""

import numpy as np

from meshrt.errors import InvalidArgumentError
from meshrt.shapes import Shape, as_shape

FLOAT32 = "float32"
INT32 = "int32"

_TO_PROTO = {FLOAT32: 1, INT32: 2}
_FROM_PROTO = {1: FLOAT32, 2: INT32}
_NUMPY = {FLOAT32: np.dtype("<f4"), INT32: np.dtype("<i4")}


def dtype_name(dtype):
    """"float32" or "int32" for a name, a numpy dtype or a proto enum value."""
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        if dtype == 0:
            return FLOAT32  # DT_INVALID means float32 where a dtype is optional
        if dtype in _FROM_PROTO:
            return _FROM_PROTO[dtype]
    elif dtype is None:
        return FLOAT32
    else:
        name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
        if name in _TO_PROTO:
            return name
    raise InvalidArgumentError(f"meshrt tensors are float32 or int32, not {dtype!r}")


def dtype_proto(dtype):
    """The meshrt.v1.DType enum value of ``dtype``."""
    return _TO_PROTO[dtype_name(dtype)]


def numpy_dtype(dtype):
    """The little-endian numpy dtype of ``dtype``."""
    return _NUMPY[dtype_name(dtype)]


def to_proto(array, shape, dtype=None, what="tensor"):
    """A TensorValue of ``array`` with the named ``shape`` (sizes must match; dtype converted).

    Refuses (InvalidArgumentError naming ``what``) arrays whose sizes differ from the shape's, and
    float arrays fed to an int32 tensor (no silent truncation).
    """
    from meshrt._proto import tensor_pb2
    shape = as_shape(shape)
    dtype = dtype_name(dtype if dtype is not None else np.asarray(array).dtype)
    a = np.asarray(array)
    if a.shape != shape.sizes:
        raise InvalidArgumentError(
            f"{what}: the array's shape {a.shape} is not the tensor's [{shape}] (sizes {shape.sizes})")
    if dtype == INT32 and a.dtype.kind == "f":
        raise InvalidArgumentError(f"{what}: an int32 tensor needs integers, not {a.dtype} values")
    a = np.ascontiguousarray(a, dtype=numpy_dtype(dtype))
    return tensor_pb2.TensorValue(dtype=_TO_PROTO[dtype], shape=shape.to_proto(),
                                  content=a.tobytes())


def from_proto(proto):
    """(numpy array, Shape) of a TensorValue (raw content or the repeated value fields)."""
    shape = Shape.from_proto(proto.shape)
    dtype = dtype_name(proto.dtype)
    if proto.content or shape.size == 0:
        a = np.frombuffer(proto.content, dtype=numpy_dtype(dtype)).copy()
    elif dtype == FLOAT32:
        a = np.array(proto.float_val, dtype=np.float32)
    else:
        a = np.array(proto.int_val, dtype=np.int32)
    if a.size != shape.size:
        raise InvalidArgumentError(f"tensor of shape [{shape}] holds {a.size} values")
    return a.reshape(shape.sizes), shape
