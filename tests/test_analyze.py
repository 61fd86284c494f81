"""`triton-mini analyze` (issue 46, stage 3) as a user runs it: a tiny search on a fast numpy Python model made here,
checked through the files it writes (output model repository, CSV, PNG, HTML) and its choice; bad input in one line."""
import csv, subprocess, sys

import pytest

MODEL_PY = '''
import numpy as np
import triton_python_backend_utils as pb_utils
W = np.random.default_rng(0).standard_normal((128, 128)).astype(np.float32)
class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            y = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            for _ in range(10): y = np.tanh(y @ W)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", y.astype(np.float32))]))
        return out
'''
CONFIG = '''name: "fast"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1, 128 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1, 128 ] } ]
'''


def analyze(*flags, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', 'triton_mini', 'analyze', *flags], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def repo(tmp_path):
    (tmp_path / 'repo/fast/1').mkdir(parents=True)
    (tmp_path / 'repo/fast/config.pbtxt').write_text(CONFIG)
    (tmp_path / 'repo/fast/1/model.py').write_text(MODEL_PY)
    return tmp_path / 'repo'


@pytest.mark.slow
def test_a_tiny_search_writes_its_report_and_picks_the_measured_best(repo, tmp_path):
    "Two candidates (1 and 2 instances: the model does not batch), two concurrencies, one 1-second window each."
    out = tmp_path / 'out'
    r = analyze('--model-repository', str(repo), '-m', 'fast', '--run-config-search-max-instance-count', '2',
                '--concurrency', '1,2', '-p', '1000', '--max-trials', '1', '--export-path', str(out))
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(out / 'results/metrics-model-inference.csv')))
    assert sorted({(row['Model Config Path'], row['Instances']) for row in rows}) == [('fast_config_0', '2'), ('fast_config_default', '1')]
    assert len(rows) == 4 and all(float(row['Throughput (infer/sec)']) > 0 for row in rows)
    best = max(rows, key=lambda row: float(row['Throughput (infer/sec)']))
    assert f"{best['Model Config Path']} (" in r.stdout.split('is chosen')[0].splitlines()[-1]    # the sentence names the measured best
    chosen = out / 'output_model_repository' / best['Model Config Path']
    assert (chosen / 'config.pbtxt').is_file() and (chosen / '1/model.py').is_file()
    assert f"count: {best['Instances']}" in (chosen / 'config.pbtxt').read_text()
    assert f'name: "{best["Model Config Path"]}"' in (chosen / 'config.pbtxt').read_text()
    png = (out / 'plots/latency_throughput.png').read_bytes()
    assert png[:8] == b'\x89PNG\r\n\x1a\n'
    page = (out / 'reports/summary.html').read_text()
    assert 'data:image/png;base64,' in page and 'is chosen' in page and best['Model Config Path'] in page
    # a second run does not overwrite the output model repository unless asked
    again = analyze('--model-repository', str(repo), '-m', 'fast', '--export-path', str(out))
    assert again.returncode == 1 and again.stderr.count('\n') == 1 and '--override-output-model-repository' in again.stderr


@pytest.mark.parametrize('flags, words', [
    (['--model-repository', '/no/such/repo', '-m', 'fast'], 'model repository /no/such/repo does not exist'),
    (['-m', 'nope'], "model 'nope' is not in the repository"),
    (['-m', 'fast', '--concurrency', 'lots'], '--concurrency takes comma-separated integers'),
])
def test_bad_input_is_one_line(repo, flags, words):
    if '--model-repository' not in flags: flags = ['--model-repository', str(repo), *flags]
    r = analyze(*flags, timeout=60)
    assert (r.returncode, r.stdout) == (1, '')
    assert r.stderr.startswith('error: ') and r.stderr.count('\n') == 1 and words in r.stderr, r.stderr


# --- llama.cpp's n_threads as a knob, and quick vs brute, with a stand-in measure (no server, no timing) ---
from pathlib import Path

from triton_mini import analyze as az
from triton_mini.cli import example_repository

M = az.Measurement


def llama_machine(cores):
    "A made-up llama.cpp machine: threads help an instance less than linearly, and threads beyond the cores crowd."
    def measure(args, folder, config, c, log):
        crowd = max(1, c.instances * c.n_threads / cores)
        return [M(k, min(k, c.instances) ** 0.8 * c.n_threads ** 0.6 / crowd ** 2, 40.0 * k, 30.0, 'requests/sec') for k in args.concurrency]
    return measure


def linear_machine(args, folder, config, c, log):
    "A made-up batching model: 2 instances and a 100 us delay with batch 4 win."
    t = 1000 * (1.4 if c.instances == 2 else 1) * (1 + (c.delay_us is not None) * (0.3 + 0.2 * (c.delay_us == 100)) * (1 + 0.1 * (c.max_batch_size == 4)))
    return [M(k, t * k / max(args.concurrency), 2.0 * k, 1.5) for k in args.concurrency]


def run(model, mode, tmp_path, measure, *flags):
    args = az.parse_args(['--model-repository', str(example_repository()), '-m', model, '--run-config-search-mode', mode,
                          '--concurrency', '1,4', '--export-path', str(tmp_path / mode), *flags])
    return args, az.analyze(args, log=lambda *_: None, measure=measure)


@pytest.mark.parametrize('model, measure, flags', [
    ('qwen_gguf', llama_machine(2), ['--cpu-cores', '2', '--run-config-search-max-instance-count', '2']),
    ('qwen_gguf', llama_machine(4), ['--cpu-cores', '4', '--run-config-search-max-instance-count', '4']),
    ('linear_onnx', linear_machine, ['--run-config-search-max-instance-count', '2']),
])
def test_quick_pick_is_one_brute_measured_and_the_report_says_why(tmp_path, model, measure, flags):
    _, (brute, bnames, _) = run(model, 'brute', tmp_path, measure, *flags)
    args, (quick, qnames, sentence) = run(model, 'quick', tmp_path, measure, *flags)
    pick, best = quick[0][0], brute[0][0]
    assert pick in {c for c, _, _ in brute}                       # a config the full sweep measured too
    assert {c for c, _, _ in quick} <= {c for c, _, _ in brute}   # quick never leaves the space brute sweeps
    assert pick == best                                           # a deterministic machine: the same choice
    assert sentence.startswith(f'{qnames[pick]} ({pick.describe()}) is chosen: at concurrency 4')
    assert f'the highest throughput of the {len(quick)} configs measured (quick search)' in sentence
    runner = quick[1][0]
    assert f'The runner-up, {qnames[runner]} ({runner.describe()}), reached' in sentence
    assert sentence.replace("'", '&#x27;') in (tmp_path / 'quick/reports/summary.html').read_text()


def test_n_threads_knob_is_bounded_by_the_cores_and_written_into_the_variant(tmp_path):
    args, (ranked, names, sentence) = run('qwen_gguf', 'brute', tmp_path, llama_machine(2), '--cpu-cores', '2', '--run-config-search-max-instance-count', '2')
    assert sorted((c.instances, c.n_threads) for c, _, _ in ranked) == [(1, 1), (1, 2), (2, 1)]   # 2 x 2 asks 4 cores of 2
    rows = list(csv.DictReader(open(tmp_path / 'brute/results/metrics-model-inference.csv')))
    assert {(r['Instances'], r['n_threads']) for r in rows} == {('1', '1'), ('1', '2'), ('2', '1')}
    assert 'Throughput (requests/sec)' in rows[0]
    best = ranked[0][0]
    text = (tmp_path / 'brute/output_model_repository' / names[best] / 'config.pbtxt').read_text()
    assert f'count: {best.instances}' in text and f'string_value: "{best.n_threads}"' in text and 'EXECUTION_ENV' in text
    assert (tmp_path / 'brute/output_model_repository' / names[best] / '1/model.gguf').is_file()
    # the flags: a thread list of one's own, and a wider machine
    wide = az.parse_args(['--model-repository', 'r', '-m', 'q', '--cpu-cores', '8', '--n-threads', '2,4', '--run-config-search-max-instance-count', '4'])
    _, config = az.load_config(example_repository(), 'qwen_gguf')
    space = az.search_space(wide, config)
    cands = az.brute_candidates(space, az.default_candidate(config))
    assert all(c.instances * c.n_threads <= 8 for c in cands[1:]) and {c.n_threads for c in cands[1:]} == {2, 4}
    # a model without the parameter has no such knob
    _, linear = az.load_config(example_repository(), 'linear_onnx')
    assert az.search_space(wide, linear)['n_threads'] == [None] and az.default_candidate(linear).n_threads is None


def test_a_decoupled_llm_is_searched_over_generate_stream_other_decoupled_models_are_not(tmp_path):
    _, config = az.load_config(example_repository(), 'qwen_gguf_stream')
    assert config.model_transaction_policy.decoupled and az.is_llm(config)
    (tmp_path / 'm').mkdir()
    (tmp_path / 'm/config.pbtxt').write_text('name: "m" backend: "python" model_transaction_policy { decoupled: true }\n'
                                             'input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ] output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]')
    with pytest.raises(az.AnalyzeError, match="is decoupled: perf measures one response per request"): az.load_config(tmp_path, 'm')


@pytest.mark.slow
def test_a_llama_search_on_the_random_gguf_serves_and_measures_each_thread_split(tmp_path):
    "The real thing, short: the bundled random-weight GGUF, 1 x 1, 2 x 1 and 1 x 2 on 2 cores, served and driven over generate."
    pytest.importorskip('llama_cpp')
    out = tmp_path / 'out'
    r = analyze('--model-repository', str(example_repository()), '-m', 'qwen_gguf', '--cpu-cores', '2', '--run-config-search-max-instance-count', '2',
                '--run-config-search-mode', 'brute', '--concurrency', '2', '-p', '500', '--output-tokens-mean', '8', '--export-path', str(out))
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(out / 'results/metrics-model-inference.csv')))
    assert sorted((row['Instances'], row['n_threads']) for row in rows) == [('1', '1'), ('1', '2'), ('2', '1')]
    assert all(float(row['Throughput (requests/sec)']) > 0 for row in rows)
    best = max(rows, key=lambda row: float(row['Throughput (requests/sec)']))
    assert f"{best['Model Config Path']} (" in r.stdout and 'is chosen' in r.stdout
    assert f'string_value: "{best["n_threads"]}"' in (out / 'output_model_repository' / best['Model Config Path'] / 'config.pbtxt').read_text()
