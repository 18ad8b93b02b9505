"""Just enough of the ONNX protobuf format to hand onnxruntime a graph we build ourselves, without the `onnx` package.

Field numbers are those of onnx/onnx.proto (IR version 8); each message is written as protobuf wire format directly:
a key (field number << 3 | wire type) then a varint, or a length and bytes. Repeated scalars are written unpacked,
which every protobuf parser accepts. Only what `minilm_int8.py` uses is here.
"""
from __future__ import annotations

import struct

import numpy as np

IR_VERSION = 8
FLOAT, UINT8, INT8, INT32, INT64 = 1, 2, 3, 6, 7  # TensorProto.DataType
_DATA_TYPES = {np.dtype(np.float32): FLOAT, np.dtype(np.uint8): UINT8, np.dtype(np.int8): INT8,
               np.dtype(np.int32): INT32, np.dtype(np.int64): INT64}
_ATTR_FLOAT, _ATTR_INT, _ATTR_INTS = 1, 2, 7  # AttributeProto.AttributeType


Message = list[bytes]
"""A message as a list of byte strings, joined once at the end: nesting then never copies the large tensors."""


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 as two's complement, as protobuf does
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _int(field: int, value: int) -> Message:
    return [_varint(field << 3) + _varint(value)]


def _field(field: int, value: bytes | str | Message) -> Message:
    """A length-delimited field: bytes, a string or a nested message."""
    parts = [value.encode()] if isinstance(value, str) else [value] if isinstance(value, bytes) else value
    return [_varint(field << 3 | 2) + _varint(sum(len(part) for part in parts)), *parts]


def _repeated(field: int, messages: list[Message]) -> Message:
    return [part for message in messages for part in _field(field, message)]


def tensor(name: str, array: np.ndarray) -> Message:
    """TensorProto: dims=1, data_type=2, name=8, raw_data=9 (little-endian)."""
    array = np.asarray(array)
    raw = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
    return [*(part for d in array.shape for part in _int(1, d)), *_int(2, _DATA_TYPES[array.dtype]),
            *_field(8, name), *_field(9, raw)]


def _attribute(name: str, value: float | list[int]) -> Message:
    """AttributeProto: name=1, f=2 (fixed32), i=3, ints=8, type=20."""
    if isinstance(value, float):
        return [*_field(1, name), _varint(2 << 3 | 5) + struct.pack("<f", value), *_int(20, _ATTR_FLOAT)]
    if isinstance(value, int):
        return [*_field(1, name), *_int(3, value), *_int(20, _ATTR_INT)]
    return [*_field(1, name), *(part for v in value for part in _int(8, v)), *_int(20, _ATTR_INTS)]


def node(op_type: str, inputs: list[str], outputs: list[str], name: str, domain: str = "",
         **attributes: float | list[int]) -> Message:
    """NodeProto: input=1, output=2, name=3, op_type=4, attribute=5, domain=7. An input "" is an omitted optional."""
    return [*_repeated(1, [[i.encode()] for i in inputs]), *_repeated(2, [[o.encode()] for o in outputs]),
            *_field(3, name), *_field(4, op_type),
            *_repeated(5, [_attribute(k, v) for k, v in attributes.items()]), *(_field(7, domain) if domain else [])]


def value_info(name: str, elem_type: int, dims: list[int | str]) -> Message:
    """ValueInfoProto{name=1, type=2: TypeProto{tensor_type=1: {elem_type=1, shape=2: {dim=1: {value=1|param=2}}}}}."""
    shape = _repeated(1, [_int(1, d) if isinstance(d, int) else _field(2, d) for d in dims])
    return [*_field(1, name), *_field(2, _field(1, [*_int(1, elem_type), *_field(2, shape)]))]


def model(nodes: list[Message], initializers: list[Message], inputs: list[Message], outputs: list[Message],
          opsets: dict[str, int], graph_name: str = "graph") -> bytes:
    """The serialized ModelProto{ir_version=1, opset_import=8: {domain=1, version=2}, graph=7: GraphProto{node=1,
    name=2, initializer=5, input=11, output=12}}."""
    graph = [*_repeated(1, nodes), *_field(2, graph_name), *_repeated(5, initializers), *_repeated(11, inputs),
             *_repeated(12, outputs)]
    opset_import = _repeated(8, [[*(_field(1, d) if d else []), *_int(2, v)] for d, v in opsets.items()])
    return b"".join([*_int(1, IR_VERSION), *opset_import, *_field(7, graph)])
