"""Triton's own model-configuration QA (`qa/L0_model_config`, NVIDIA's corpus in ../shared/triton-qa), run the way
its test.sh runs it: 200 of 200 cases pass on triton-mini; real Triton 2.51 passes 191 of 191.

Each case is a test here, on triton-mini (`python -m triton_mini`, a subprocess like test.sh's tritonserver) and on
the real Triton (`-m oracle`, where ../shared/oracle is present). The harness is `tests/triton_qa.py`: which cases run
and how test.sh prepares, starts and judges them, the CPU-only adaptations, and how cases share a server.

The 191 CPU-relevant cases: cli_messages (2), special_cases (3), noautofill_platform with `platform: "onnxruntime_onnx"`
under `--strict-model-config=true` and under `--disable-auto-complete-config` (2 x 58), autofill_noplatform common /
custom / ensemble / python (1 + 2 + 32 + 17), autofill_noplatform_success custom / ensemble / python (2 + 4 + 12);
and on triton-mini only, the OpenVINO auto-complete cases, autofill_noplatform/openvino (6) and
autofill_noplatform_success/openvino (3): the oracle has no OpenVINO backend, so their `expected*` files judge alone.
They need the openvino extra and the server repository's git directory (`$TRITON_SERVER_REPO`, for qa/openvino_models);
without them they skip, or fail where `TRITON_MINI_REQUIRE` names `openvino_qa` (.ci/run's OpenVINO step). Run them
alone with `pytest -n 0 tests/test_triton_qa.py -k openvino`.
Not run, and why: see `triton_qa.NOT_RUN` (backends a CPU machine lacks, model files only NVIDIA's /data has, and
model_metrics, newer than Triton 2.51).

triton-mini's failures are listed, each with its cause, in `tests/triton_qa_known_failures.txt`: they are strict
xfails, so a fix that makes a case pass fails its test until the line is removed (and the figure above updated:
`test_docstring_states_the_figure` checks it). Every other case must pass.

Runtime on 2 busy cores: ~20-40 s for triton-mini, ~40 s for Triton (about 25 server starts each, 3 at a time).
"""
import re, sys
from pathlib import Path

import pytest

import triton_qa as qa
from triton_servers import oracle_or_skip, skip_or_fail

CASES = qa.cases() if qa.available() else []
KNOWN_FAILURES_FILE = Path(__file__).parent / 'triton_qa_known_failures.txt'
NO_CORPUS = f'Triton QA corpus not found at {qa.L0} (set TRITON_QA_DIR to the folder holding qa/)'


def known_failures() -> dict:
    "{case id: cause} from triton_qa_known_failures.txt (`<case id>  <cause>` lines, # comments)."
    out = {}
    for line in KNOWN_FAILURES_FILE.read_text().splitlines():
        line = line.split('#', 1)[0].strip()
        if line:
            cid, _, cause = line.partition(' ')
            out[cid] = cause.strip()
    return out


KNOWN = known_failures()


def params(kind:str) -> list:
    if not CASES: return [pytest.param(None, id='corpus-absent')]   # skipped (or failed) by the `corpus` fixture
    marks = lambda c: [pytest.mark.xfail(strict=True, reason=KNOWN[c.id])] if kind == 'mini' and c.id in KNOWN else []
    return [pytest.param(c, id=c.id, marks=marks(c)) for c in CASES if kind == 'mini' or qa.oracle_runs(c)]


@pytest.fixture(scope='module')
def corpus():
    "The one place this module skips for want of the corpus (or fails: `TRITON_MINI_REQUIRE=qa`, as CI sets it)."
    if not CASES: skip_or_fail('qa', NO_CORPUS)


@pytest.fixture(scope='module')
def verdicts(request, corpus):
    "{kind: {case id: (passed, detail)}}: a server kind's selected cases all run on first use, several servers at a time."
    cache = {}
    def get(kind:str, case) -> tuple:
        if kind not in cache:
            test = f'test_{kind}_passes_triton_qa'
            selected = [item.callspec.params['case'] for item in request.session.items
                        if getattr(item, 'originalname', None) == test and item.module is sys.modules[__name__]]
            cache[kind] = qa.run_cases(kind, [c for c in selected if c is not None and not qa.missing(c)])
        return cache[kind][case.id]
    return get


@pytest.mark.slow
@pytest.mark.parametrize('case', params('mini'))
def test_mini_passes_triton_qa(case, verdicts):
    if why := qa.missing(case): skip_or_fail('openvino_qa', why)
    ok, detail = verdicts('mini', case)
    assert ok, f'{case.id}: {detail}'


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize('case', params('triton'))
def test_triton_passes_triton_qa(case, verdicts):
    "Real Triton passes every case: where it does not, the harness is wrong, not Triton."
    oracle_or_skip()
    ok, detail = verdicts('triton', case)
    assert ok, f'{case.id}: {detail}'


@pytest.mark.usefixtures('corpus')
def test_known_failures_name_cases_with_causes():
    ids = {c.id for c in CASES}
    assert not set(KNOWN) - ids, f'not a case: {sorted(set(KNOWN) - ids)}'
    assert all(KNOWN.values()), [cid for cid, cause in KNOWN.items() if not cause]


@pytest.mark.usefixtures('corpus')
def test_docstring_states_the_figure():
    m = re.search(r'(\d+) of (\d+) cases pass on triton-mini; real Triton 2.51 passes (\d+) of (\d+)', ' '.join(__doc__.split()))
    assert m, 'the docstring lost its figure'
    oracle_cases = sum(map(qa.oracle_runs, CASES))
    assert tuple(map(int, m.groups())) == (len(CASES) - len(KNOWN), len(CASES), oracle_cases, oracle_cases)


# The judge itself, without servers: each of these would let a wrong verdict through if it broke.
def test_grep_is_basic_regex_as_in_test_sh():
    line = 'E1203 12:00:00.000000 1 f.cc:1] "model \'m\', tensor \'X\': the model expects dims [4] (a+b)"\n'
    assert qa.grep("^E[0-9][0-9][0-9][0-9].*the model expects dims \\[4\\] (a+b)", line)   # ( + are literal in BRE
    assert not qa.grep('^E[0-9][0-9][0-9][0-9].*dims \\[16\\]', line)
    assert not qa.grep('^E[0-9][0-9][0-9][0-9].*expects', 'I' + line[1:])               # only E lines count
    assert not qa.grep('^E[0-9][0-9][0-9][0-9].*expects', 'E1203 12:00:00.000000 1 f.cc:1] \nthe model expects\n')


def test_grouped_cases_see_only_lines_naming_their_model():
    log = ("E1 x] \"Poll failed for model directory 'a_2': bad\"\nE2 x] \"failed to load 'a.b'\"\n"
           "E3 x] \"Poll failed for model directory 'a': worse\"\nE4 x] \"ensemble a whose platform\"\n")
    assert qa.lines_naming(log, {'a'}).splitlines() == [log.splitlines()[2], log.splitlines()[3]]
    assert qa.lines_naming(log, {'a.b'}).splitlines() == [log.splitlines()[1]]


def test_gpu_recorded_expectation_becomes_cpu():
    import tritonclient.grpc.model_config_pb2 as mc
    from google.protobuf import text_format
    cfg = text_format.Parse('name: "m" instance_group { name: "m" count: 1 gpus: 0 kind: KIND_GPU }', mc.ModelConfig())
    assert text_format.MessageToString(qa.cpu_expected(cfg)) == 'name: "m"\ninstance_group {\n  name: "m"\n  count: 1\n  kind: KIND_CPU\n}\n'


@pytest.mark.usefixtures('corpus')
def test_staging_follows_test_sh(tmp_path):
    by_id = {c.id: c for c in CASES}
    qa.stage(by_id['noautofill_platform/strict/invalid_cpu'], tmp_path)          # platform replaced, a version folder
    cfg = (tmp_path / 'invalid_cpu' / 'config.pbtxt').read_text()
    assert cfg.endswith('platform: "onnxruntime_onnx"\n') and cfg.count('platform:') == 1 and (tmp_path / 'invalid_cpu' / '1').is_dir()
    qa.stage(by_id['autofill_noplatform/python/input_mismatch_dims'], tmp_path)  # the QA's auto_complete model.py
    assert (tmp_path / 'input_mismatch_dims' / '1' / 'model.py').read_text() == (qa.QA / 'python_models' / 'auto_complete' / 'model.py').read_text()
    qa.stage(by_id['autofill_noplatform/common/no_version'], tmp_path)           # no version folder, as its name says
    assert [p.name for p in (tmp_path / 'no_version').iterdir() if p.is_dir()] == []
    repo = tmp_path / 'repo'
    repo.mkdir()
    qa.stage(by_id['autofill_noplatform/ensemble/circular_dependency'], repo)    # a whole repository: versions for all
    assert sorted(p.name for p in repo.iterdir()) == ['circular_dependency', 'circular_dependency_2', 'expected', 'expected_2']
    assert all((repo / m / '1').is_dir() for m in ('circular_dependency', 'circular_dependency_2'))


@pytest.mark.usefixtures('corpus')
def test_openvino_cases_are_staged_as_test_sh_stages_them(tmp_path):
    "cp -r qa/openvino_models/fixed_batch/1 into each case, dynamic_batch/1 into dynamic_batch; no_config is one model."
    if why := qa.openvino_models_missing(): skip_or_fail('openvino_qa', why)
    by_id = {c.id: c for c in CASES}
    assert 'autofill_noplatform_success/openvino/partial_config' not in by_id   # NVIDIA's /data only: NOT_RUN
    for cid in ('autofill_noplatform/openvino/too_few_inputs', 'autofill_noplatform_success/openvino/no_config',
                'autofill_noplatform_success/openvino/dynamic_batch'):
        case = by_id[cid]
        assert not case.whole_repo and not qa.oracle_runs(case), cid
        qa.stage(case, tmp_path)
        files = sorted(p.name for p in (tmp_path / case.target / '1').iterdir())
        assert files == ['model.bin', 'model.mapping', 'model.xml'], (cid, files)
    xml = lambda name: (tmp_path / name / '1' / 'model.xml').read_text()
    assert '<net name="fixed_batch"' in xml('no_config') and '<net name="dynamic_batch"' in xml('dynamic_batch')
