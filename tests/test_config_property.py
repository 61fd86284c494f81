"""Random damage to valid configs (hypothesis): triton_mini never fails with anything but ConfigError, and it
accepts and rejects like protobuf, except where C++ protobuf (Triton) and Python protobuf are known to differ.

Mutations: delete / insert / replace a byte, delete / insert / replace a token (from a pool of field names, enum
values, numbers in every notation, strings, braces and separators). The known differences were found by running
tens of thousands of these mutations; each one is pinned by a corpus file checked on the real server
(tests/configs: bad_escape, nul_in_string, nul_in_comment, minus_space, invalid_utf8, enum_octal).
"""
import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from test_config_differential import google_dict, normal, text_format, model_config_pb2
from test_config_parser import CASES
from triton_mini.model_config import ConfigError, ModelConfig
from triton_mini.config_parser import parse_config
from triton_mini.model_config_utils import autofill_config, validate_config

BODIES = [c.data.split(b'\n', 4)[4] for c in CASES if c.kind == 'valid']   # without the corpus header
TOKEN = re.compile(rb'[A-Za-z_][A-Za-z0-9_]*|-?[0-9][0-9A-Za-z.+-]*|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|#[^\n]*|\s+|.', re.S)
POOL = [b'{', b'}', b'[', b']', b'<', b'>', b':', b',', b';', b'-', b'"x"', b"'y'", b'0', b'1', b'-1', b'010', b'0x1F',
        b'1.5', b'1e3', b'2.5f', b'.5', b'true', b'false', b't', b'TYPE_FP32', b'KIND_CPU', b'11', b'name', b'dims',
        b'input', b'output', b'max_batch_size', b'dynamic_batching', b'sequence_batching', b'ensemble_scheduling',
        b'version_policy', b'latest', b'parameters', b'key', b'value', b'string_value', b'inf', b'nan', b'#c\n', b'\n',
        b' ', b'\t', b'""', b'"\\x41"', b'"\\q"', b'optional', b'reshape', b'shape', b'count', b'kind', b'platform',
        b'"ensemble"', b'instance_group', b'step', b'input_map', b'zero_data', b'[foo]', b'2147483648', b'-0']
BYTES = b'{}[]<>:;,"\'#\\-.+0123456789eExXfF abc_\n\t\x00\x01\xc3\xa9'


def apply(data: bytes, op: int, where: int, token: bytes, byte: int) -> bytes:
    if op < 3:
        i = where % (len(data) + 1)
        return data[:i] + (b'' if op == 0 else bytes([byte])) + data[i + (op != 1):]
    toks = TOKEN.findall(data) or [b'']
    i = where % len(toks)
    if op == 3: del toks[i]
    elif op == 4: toks.insert(i, token)
    else: toks[i] = token
    return b''.join(toks)


@st.composite
def damaged(draw):
    data = draw(st.sampled_from(BODIES))
    for op, where, token, byte in draw(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 10**6), st.sampled_from(POOL),
                                                         st.sampled_from(list(BYTES))), min_size=1, max_size=3)):
        data = apply(data, op, where, token, byte)
    return data


def known_difference(data: bytes, mine_error: ConfigError | None) -> bool:
    "Is a disagreement with Python protobuf one of the documented C++/Python differences?"
    if mine_error is not None:   # we (like C++) reject, Python accepts
        nul = b'\0' in data and mine_error.message in ('Unexpected end of string.',
                                                       'Invalid control characters encountered in text.')
        # a number with a leading '+' (dims: [ +4 ], fp32_false_true: [ 0, +1 ]): Python reads it; real Triton 2.51
        # (C++) says "Expected integer, got: +" / "Expected double, got: +" and fails the model, as we do (both
        # checked 2026-12-06)
        # (an enum given as +1 is the same: C++'s ParseEnum takes an identifier, '-' or an integer token only)
        plus = mine_error.message in ('Expected integer, got: +', 'Expected double, got: +',
                                      'Expected integer or identifier, got: +')
        return nul or plus or mine_error.message == 'Invalid escape sequence in string literal.'
    try:                         # we (like C++) accept, Python rejects
        text_format.Parse(data.decode('utf-8'), model_config_pb2.ModelConfig())
    except UnicodeDecodeError:
        return True                                                       # C++ reads bytes, not UTF-8 text
    except text_format.ParseError as e:
        msg = str(e)
        return ("Couldn't parse string: 'utf-8' codec" in msg            # a string escape that is not UTF-8
                or re.search(r"Couldn't parse (integer|float): -$", msg) is not None   # '- 1'
                or re.search(r'has no value named -?[0-9]', msg) is not None)          # enum as 010, -1, - 1
    return False


SETTINGS = settings(max_examples=400, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(damaged())
def test_only_config_error(data):
    "Whatever the text, every step raises ConfigError or succeeds; what succeeds survives a JSON round trip."
    try:
        cfg = parse_config(data)
    except ConfigError as e:
        assert e.line is not None and e.column is not None and e.stage == 'parse'
        str(e), e.triton_log_message()
        return
    full = autofill_config(cfg, 'm', backend='python')
    try:
        validate_config(full, 'm')
    except ConfigError as e:
        assert e.stage in ('poll', 'load') and e.line is None
    assert ModelConfig.from_json(full.to_json()).to_json() == full.to_json()


@SETTINGS
@given(damaged())
def test_agrees_with_protobuf(data):
    "Both accept with the same values, or both reject, or it is a known C++/Python difference."
    try:
        mine, error = parse_config(data).to_dict(), None
    except ConfigError as e:
        mine, error = None, e
    theirs = google_dict(data)
    if (mine is None) != (theirs is None):
        assert known_difference(data, error), data
    elif mine is not None:
        assert normal(mine) == normal(theirs), data


@pytest.mark.parametrize('data', [b'name: "a\\qb"', b'name: "a\0b"', b'# x \0 y\n', b'max_batch_size: - 1',
                                  b'name: "\\xff"', b'input { data_type: 010 }', b'input { data_type: -01 }',
                                  b'name: "\xff"'])
def test_known_differences_are_real(data):
    "Each documented difference does make the two parsers disagree (so `known_difference` cannot hide everything)."
    try:
        mine, error = parse_config(data).to_dict(), None
    except ConfigError as e:
        mine, error = None, e
    assert (mine is None) != (google_dict(data) is None)
    assert known_difference(data, error)


def test_mutations_change_things():
    "The strategy really damages files: most mutated files no longer parse the same way."
    import random
    rng, changed = random.Random(0), 0
    for _ in range(200):
        body = rng.choice(BODIES)
        data = apply(body, rng.randrange(6), rng.randrange(10**6), rng.choice(POOL), rng.choice(list(BYTES)))
        try: changed += parse_config(data).to_dict() != parse_config(body).to_dict()
        except ConfigError: changed += 1
    assert changed > 100
