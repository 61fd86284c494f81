"""The config layer (triton_mini.model_config, .config_parser, .model_config_utils) on the config corpus in
tests/configs, plus the API contract other layers rely on.

Corpus files start with four header lines (comments, so they are part of what Triton parses):

    # <what the file shows>
    # setup: <model directory> <files to create in it>   ('-': <file stem> 1/model.py; 'oracle-skip': not run on Triton)
    # expect: ok | parse <L:C: message> | poll <message> | load <Code>: <message>
    # triton-json: <GET /v2/models/<name>/config as returned by Triton 2.51, or '-'>

`expect` and `triton-json` are recorded from the real server (`python tests/test_config_oracle.py --record`) and
re-checked by tests/test_config_oracle.py whenever the oracle is available; here we check triton_mini against them.
"""
import json, re
from dataclasses import dataclass, fields
from pathlib import Path

import pytest

from triton_mini.model_config import (DATA_TYPES, ConfigError, EnsembleStep, ModelConfig,
    ModelDynamicBatching, ModelEnsembling, ModelInput, ModelInstanceGroup, ModelOptimizationPolicy, ModelOutput,
    ModelParameter, ModelQueuePolicy, ModelRateLimiter, ModelSequenceBatching, ModelTransactionPolicy,
    ModelVersionPolicy, ModelWarmup)
from triton_mini.config_parser import ConfigParser, parse_config
from triton_mini.model_config_utils import autofill_config, validate_config

CONFIGS = Path(__file__).parent / 'configs'
PARSE_PREFIX = 'Error parsing text-format inference.ModelConfig: '


@dataclass
class Case:
    "One corpus file and what its header says."
    path: Path
    kind: str          # 'valid' (protobuf parses it) or 'invalid'
    description: str
    model: str         # model directory name
    files: list        # paths to create in the model directory ('1/' = an empty version directory)
    oracle: bool       # run on the real server?
    expect: str
    triton_json: str   # None when the header has '-'
    data: bytes        # the whole file, headers included, exactly as Triton reads it

    @property
    def id(self): return f'{self.kind}/{self.path.stem}'


def read_case(path: Path) -> Case:
    data = path.read_bytes()
    head = data.split(b'\n', 4)[:4]
    desc, setup, expect, tj = (h.decode().rstrip('\r') for h in head)
    if not (desc.startswith('# ') and setup.startswith('# setup: ') and expect.startswith('# expect: ')
            and tj.startswith('# triton-json: ')):
        raise ValueError(f'{path}: the first four lines must be the corpus header')
    setup = setup[len('# setup: '):].split()
    oracle = setup != ['oracle-skip']
    model, files = (path.stem, ['1/model.py']) if setup in (['-'], ['oracle-skip']) else (setup[0], setup[1:])
    tj = tj[len('# triton-json: '):]
    return Case(path, path.parent.name, desc[2:], model, files, oracle, expect[len('# expect: '):],
                None if tj == '-' else tj, data)


CASES = [read_case(p) for kind in ('valid', 'invalid') for p in sorted((CONFIGS / kind).glob('*.pbtxt'))]


def backend_hint(case: Case):
    "What the repository layer would tell autofill: Triton looks only at the first version directory (by name)."
    dirs = sorted({f.split('/')[0] for f in case.files if '/' in f})
    return 'python' if dirs and f'{dirs[0]}/model.py' in case.files else None


def outcome(case: Case):
    "(expect-style outcome, JSON text or None) of triton_mini for one corpus file."
    try:
        cfg = parse_config(case.data, str(case.path))
    except ConfigError as e:
        lines = [line[len(PARSE_PREFIX):] for line in e.triton_log_message().split('\n')]
        return 'parse ' + ' ;; '.join(lines), None
    full = autofill_config(cfg, case.model, backend=backend_hint(case))
    try:
        validate_config(full, case.model)
    except ConfigError as e:
        return (f'poll {e.message}' if e.stage == 'poll' else f'load {e.code}: {e.message}'), None
    return 'ok', full.to_json()


def maps_are_small(d) -> bool:
    "True if no JSON object that is a proto map has two or more keys (only then is Triton's key order stable)."
    MAPS = {'cc_model_filenames', 'metric_tags', 'parameters', 'input_map', 'output_map', 'priority_queue_policy',
            'inputs', 'input'}
    if isinstance(d, dict):
        return all((k not in MAPS or not isinstance(v, dict) or len(v) < 2) and maps_are_small(v) for k, v in d.items())
    if isinstance(d, list): return all(maps_are_small(x) for x in d)
    return True


# ---------------------------------------------------------------------------------------------- the corpus

def test_corpus_size():
    assert len([c for c in CASES if c.kind == 'valid']) >= 20 and len([c for c in CASES if c.kind == 'invalid']) >= 20
    assert all(c.expect != '?' for c in CASES if c.oracle), 'run: python tests/test_config_oracle.py --record'


@pytest.mark.parametrize('case', CASES, ids=lambda c: c.id)
def test_corpus_outcome(case):
    "Every file: parse error, poll error, load error or the exact JSON, as recorded from Triton 2.51."
    got, js = outcome(case)
    if not case.oracle:  # not recorded: it must at least parse
        assert got == 'ok'
        return
    assert got == case.expect
    if case.kind == 'invalid': assert got.startswith('parse ')
    if case.triton_json is not None:
        assert json.loads(js) == json.loads(case.triton_json)
        if maps_are_small(json.loads(js)): assert js == case.triton_json


@pytest.mark.parametrize('case', [c for c in CASES if c.kind == 'invalid'], ids=lambda c: c.id)
def test_invalid_error_is_readable(case):
    "str(error) is file:line:column: message, the source line, a caret; never a traceback."
    with pytest.raises(ConfigError) as info:
        ConfigParser().parse_file(case.path)
    e = info.value
    head, src, caret = str(e).split('\n')
    assert head == f'{case.path}:{e.line}:{e.column}: {e.message}' + (f' (in field {e.field})' if e.field else '')
    assert src.startswith('    ') and caret.strip() == '^' and len(caret) - 1 <= len(src) + 1
    assert e.stage == 'parse' and e.path == str(case.path)
    assert e.triton_log_message().startswith(f'{PARSE_PREFIX}{e.line}:{e.column}: {e.message}')


# ---------------------------------------------------------------------------------------------- the contract

def test_seed_names_stay_in_config_parser():
    "The seed's walkthrough takes ConfigParser, parse_config and ConfigError from triton_mini.config_parser."
    import triton_mini.config_parser as cp, triton_mini.model_config as mc
    assert {'ConfigParser', 'parse_config', 'ConfigError'} <= set(cp.__all__)
    assert cp.ConfigError is mc.ConfigError
    with pytest.raises(cp.ConfigError):
        cp.ConfigParser().parse('foo: 1')


def test_error_names_the_field():
    "Protobuf's wording names the bad token; the error adds the field being read."
    with pytest.raises(ConfigError) as info:
        parse_config('name: "m"\ninput [ { name: "I" data_type: TYPE_FP32 dims: [ 2, "x" ] } ]\n', 'm/config.pbtxt')
    e = info.value
    assert (e.line, e.column, e.message, e.field) == (2, 53, 'Expected integer, got: "x"', 'input.dims')
    assert str(e).split('\n') == ['m/config.pbtxt:2:53: Expected integer, got: "x" (in field input.dims)',
                                   '    input [ { name: "I" data_type: TYPE_FP32 dims: [ 2, "x" ] } ]',
                                   '    ' + ' ' * 52 + '^']


def test_field_names_are_proto_names():
    "Attribute names (and order) follow model_config.proto."
    assert [f.name for f in fields(ModelConfig)] == [
        'name', 'platform', 'backend', 'runtime', 'version_policy', 'max_batch_size', 'input', 'output', 'batch_input',
        'batch_output', 'optimization', 'dynamic_batching', 'sequence_batching', 'ensemble_scheduling',
        'instance_group', 'default_model_filename', 'cc_model_filenames', 'metric_tags', 'parameters', 'model_warmup',
        'model_operations', 'model_transaction_policy', 'model_repository_agents', 'response_cache']
    assert [f.name for f in fields(ModelInput)] == ['name', 'data_type', 'format', 'dims', 'reshape', 'is_shape_tensor',
        'allow_ragged_batch', 'optional', 'is_non_linear_format_io']
    assert [f.name for f in fields(ModelQueuePolicy)] == ['timeout_action', 'default_timeout_microseconds',
        'allow_timeout_override', 'max_queue_size']
    assert [f.name for f in fields(EnsembleStep)] == ['model_name', 'model_version', 'input_map', 'output_map',
        'model_namespace']


def test_parsed_values_and_types():
    cfg = parse_config((CONFIGS / 'valid' / 'prio.pbtxt').read_bytes())
    db = cfg.dynamic_batching
    assert isinstance(db, ModelDynamicBatching) and cfg.sequence_batching is None and cfg.ensemble_scheduling is None
    assert (db.priority_levels, db.default_priority_level) == (3, 2)
    assert db.default_queue_policy == ModelQueuePolicy(timeout_action='REJECT', allow_timeout_override=True, max_queue_size=3)
    assert list(db.priority_queue_policy) == [1] and db.priority_queue_policy[1].timeout_action == 'DELAY'
    ens = parse_config((CONFIGS / 'valid' / 'ens.pbtxt').read_bytes()).ensemble_scheduling
    assert isinstance(ens, ModelEnsembling)
    assert [(s.model_name, s.model_version, s.input_map, s.output_map) for s in ens.step] == [
        ('step_c', -1, {'P': 'A', 'Q': 'b_out'}, {'R': 'SUM'}), ('step_a', -1, {'IN': 'X'}, {'OUT': 'A'}),
        ('step_b', -1, {'IN': 'X'}, {'OUT': 'b_out'})]


def test_presence_and_enums():
    cfg = parse_config('input [ { name: "I" data_type: 11 dims: [ 4 ] reshape { shape: [ 2, 2 ] } } ]'
                       'output [ { name: "O" data_type: TYPE_FP32 dims: [ 4 ] } ] version_policy { latest { } }')
    assert cfg.input[0].data_type == 'TYPE_FP32' and cfg.input[0].reshape.shape == [2, 2]
    assert cfg.output[0].reshape is None and cfg.model_transaction_policy is None and cfg.optimization is None
    vp = cfg.version_policy
    assert isinstance(vp, ModelVersionPolicy) and vp.latest.num_versions == 0 and vp.all is None and vp.specific is None
    assert DATA_TYPES['TYPE_FP32'] == 11 and DATA_TYPES['TYPE_BF16'] == 14 and len(DATA_TYPES) == 15


def test_autofill_does_not_mutate():
    cfg = parse_config('backend: "python" max_batch_size: 4 dynamic_batching { }')
    before = ModelConfig.from_dict(cfg.to_dict())
    full = autofill_config(cfg, 'm')
    assert cfg == before and full is not cfg
    assert full.instance_group == [ModelInstanceGroup(name='m', kind='KIND_CPU', count=1)]
    assert full.dynamic_batching.preferred_batch_size == [4]
    assert isinstance(full.optimization, ModelOptimizationPolicy) and full.optimization.input_pinned_memory.enable


def test_validate_stages():
    ok = autofill_config(parse_config('backend: "python"'), 'm')
    validate_config(ok, 'm')
    with pytest.raises(ConfigError) as info:
        validate_config(ok, 'other')
    assert info.value.stage == 'poll' and info.value.line is None
    bad = autofill_config(parse_config('backend: "python" input [ { name: "I" data_type: TYPE_FP32 } ]'), 'm')
    with pytest.raises(ConfigError) as info:
        validate_config(bad, 'm')
    assert (info.value.stage, info.value.code) == ('load', 'Invalid argument')
    with pytest.raises(ConfigError) as info:
        validate_config(bad, 'm', strict=True)
    assert info.value.stage == 'poll'


def test_json_round_trip_over_corpus():
    "from_dict(to_dict(x)) == x for every parsable corpus file (raw and autofilled)."
    for case in CASES:
        try:
            cfg = parse_config(case.data)
        except ConfigError:
            continue
        for c in (cfg, autofill_config(cfg, case.model, backend=backend_hint(case))):
            back = ModelConfig.from_json(c.to_json())
            assert back.to_json() == c.to_json(), case.id


def test_from_json_accepts_what_the_load_api_accepts():
    cfg = ModelConfig.from_json(json.dumps({
        'name': 'j', 'backend': 'python', 'maxBatchSize': '3', 'input': [{'name': 'I', 'data_type': 'type_fp32',
        'dims': ['2']}], 'output': [{'name': 'O', 'dataType': 11, 'dims': [2]}], 'parameters': {'k': {'string_value': 'v'}},
        'model_transaction_policy': None}))
    assert cfg.max_batch_size == 3 and cfg.input[0].data_type == cfg.output[0].data_type == 'TYPE_FP32'
    assert cfg.parameters == {'k': ModelParameter(string_value='v')} and cfg.model_transaction_policy is None
    for bad, message in [({'inputs': []}, 'inputs: Cannot find field.'),
                         ({'input': [{'shape': [1]}]}, '(input[0]) shape: Cannot find field.'),
                         ({'max_batch_size': 2.5}, '(max_batch_size): invalid value 2.5 for type TYPE_INT32'),
                         ({'max_batch_size': 2**31}, 'for type TYPE_INT32'),
                         ({'instance_group': {}}, '(instance_group): invalid value {} for type list')]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            ModelConfig.from_dict(bad)
