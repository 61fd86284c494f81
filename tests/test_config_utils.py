"""triton_mini.model_config_utils: Triton's validation messages, one config wrong in exactly one way per row.

nbs/00c_model_config_utils.ipynb shows one row per kind of check; this is the rest of the table. Every message was
recorded from Triton 2.51 (tests/configs holds the same configs as corpus files, re-checked against the server by
tests/test_config_oracle.py).
"""
import pytest

from triton_mini.model_config import ConfigError
from triton_mini.config_parser import parse_config
from triton_mini.model_config_utils import autofill_config, validate_config

IO = 'input [ { name: "I" data_type: TYPE_FP32 dims: [ 2 ] } ] output [ { name: "O" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
STEP = 'model_name: "a" input_map { key: "I" value: "X" } output_map { key: "O" value: "Y" }'


def verr(text, name='m', backend='python', **kw):
    "(stage, message) of the first problem validate_config finds in `text` for model directory `name`, or None."
    try: validate_config(autofill_config(parse_config(text), name, backend=backend), name, **kw)
    except ConfigError as e: return e.stage, e.message
    return None


@pytest.mark.parametrize('text, name, backend, expected', [
    ('platform: "ensemble"\n' + IO, 'e', None,
     ('poll', 'ensemble scheduling must be set for ensemble e whose platform is ensemble')),
    ('platform: "ensemble" ensemble_scheduling { step [ { model_name: "a" output_map { key: "O" value: "Y" } } ] }\n' + IO,
     'e', None, ('poll', "must specify 'input_map' in step 0 of ensemble 'e'")),
    (f'platform: "ensemble" ensemble_scheduling {{ step [ {{ {STEP} }}, {{ {STEP} }} ] }}\n' + IO, 'e', None,
     ('poll', "ensemble tensor 'Y' can appear in an output map only once for ensemble 'e' step 1")),
    ('input [ { name: "I" dims: [ 2 ] } ]', 'm', 'python', ('load', "model input 'I' must specify 'data_type' for m")),
    ('input [ { name: "I" data_type: TYPE_FP32 dims: [ 0 ] } ]', 'm', 'python',
     ('load', "model input 'I' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for m")),
    ('input [ { name: "I" data_type: TYPE_INT32 dims: [ 2 ] is_shape_tensor: true } ]', 'm', 'python',
     ('load', 'shape tensors are only supported for TensorRT platform for m')),
], ids=['ens_no_scheduling', 'ens_missing_input_map', 'ens_dup_out', 'no_dtype', 'zero_dim', 'shape_tensor'])
def test_message(text, name, backend, expected):
    assert verr(text, name, backend) == expected
