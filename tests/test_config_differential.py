"""triton_mini's parser against Google's: every corpus file through both, field values compared.

The reference is `google.protobuf.text_format.Parse` into `tritonclient.grpc.model_config_pb2.ModelConfig` (test-only
dependency). It is protobuf's *Python* parser on a *newer* model_config.proto, while Triton 2.51 uses the C++ parser on
its own proto; the few files where they differ are listed in DIVERGENT with the reason, and each of those files is
checked against the real server by tests/test_config_oracle.py (where triton_mini sides with Triton).
"""
import math, re, struct

import pytest

from test_config_parser import CASES
from triton_mini.model_config import ConfigError
from triton_mini.config_parser import parse_config

text_format = pytest.importorskip('google.protobuf.text_format')
json_format = pytest.importorskip('google.protobuf.json_format')
model_config_pb2 = pytest.importorskip('tritonclient.grpc.model_config_pb2')

DIVERGENT = {
    'valid/minus_space': "C++ reads '- 1' as -1; Python wants the sign next to the digits",
    'valid/invalid_utf8': 'C++ keeps non-UTF-8 bytes in a string field; Python refuses them',
    'invalid/bad_escape': "Python keeps an unknown escape such as \\q as it is; C++ rejects it",
    'invalid/nul_in_string': 'a NUL byte ends a string for C++ (an error); Python keeps it in the string',
    'invalid/nul_in_comment': 'a NUL byte ends a comment for C++ and is then an invalid character; Python skips it',
    'valid/enum_octal': 'C++ reads an enum number written in octal or hex (010, 0x8); Python looks for a value named 010',
    'invalid/model_metrics': 'tritonclient ships a newer model_config.proto that has model_metrics; 2.51 does not',
    'invalid/max_inflight_requests': "the newer proto also has the ensemble's max_inflight_requests",
}
NEWER_FIELDS = {('ensemble_scheduling', 'max_inflight_requests')}  # printed by MessageToDict (always 0 here); not in 2.51


def google_dict(data: bytes):
    "Google's parse of one file as a plain dict (every field without presence included), or None if it refuses."
    try:
        msg = text_format.Parse(data.decode('utf-8'), model_config_pb2.ModelConfig())
    except (text_format.ParseError, ValueError):  # ValueError: not UTF-8, or an enum number out of range
        return None
    return json_format.MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def f32(x: float) -> float:
    return x if math.isnan(x) or math.isinf(x) else struct.unpack('f', struct.pack('f', x))[0]


def normal(v, path=()):
    """One comparable form for both sides: 64-bit integers as ints (protobuf's JSON prints them as strings, Triton as
    numbers except in three places), floats rounded to float32, the newer proto's extra fields dropped."""
    if isinstance(v, dict):
        return {k: normal(x, path + (k,)) for k, x in v.items() if (path[-1:] + (k,)) not in NEWER_FIELDS}
    if isinstance(v, list): return [normal(x, path) for x in v]
    if isinstance(v, bool): return v
    if isinstance(v, str) and re.fullmatch(r'-?\d+', v): return int(v)
    if isinstance(v, str) and v in ('NaN', 'Infinity', '-Infinity'): return f32(float(v.replace('Infinity', 'inf')))
    if isinstance(v, float): return f32(v)
    return v


def ours(data: bytes):
    try:
        return parse_config(data).to_dict()
    except ConfigError:
        return None


@pytest.mark.parametrize('case', CASES, ids=lambda c: c.id)
def test_same_as_google_protobuf(case):
    mine, theirs = ours(case.data), google_dict(case.data)
    if case.id in DIVERGENT:
        assert (mine is None) != (theirs is None), f'no longer divergent: {DIVERGENT[case.id]}'
        assert (mine is None) == (case.kind == 'invalid')   # we side with Triton 2.51
        return
    if case.kind == 'invalid':
        assert mine is None and theirs is None
        return
    assert mine is not None and theirs is not None
    assert normal(mine) == normal(theirs)


def test_comparison_can_fail():
    "The normalisation keeps differences that matter: a changed dim, enum, float or map entry is noticed."
    base = normal(google_dict(b'input [ { name: "I" data_type: TYPE_FP32 dims: [ 2 ] } ] parameters { key: "k" value { string_value: "v" } }'))
    for other in (b'input [ { name: "I" data_type: TYPE_FP32 dims: [ 3 ] } ] parameters { key: "k" value { string_value: "v" } }',
                  b'input [ { name: "I" data_type: TYPE_FP16 dims: [ 2 ] } ] parameters { key: "k" value { string_value: "v" } }',
                  b'input [ { name: "I" data_type: TYPE_FP32 dims: [ 2 ] } ] parameters { key: "k" value { string_value: "w" } }',
                  b'input [ { name: "I" data_type: TYPE_FP32 dims: [ 2 ] } ]'):
        assert normal(ours(other)) != base
    assert normal(ours(b'sequence_batching { direct { minimum_slot_utilization: 0.3 } }')) != \
        normal(google_dict(b'sequence_batching { direct { minimum_slot_utilization: 0.30001 } }'))
