"""`triton-mini genai-perf` (issue 46, stage 2) against a running triton-mini: a fake streaming decoupled Python model
(N tokens, a fixed sleep before each: no llama.cpp) profiled over generate_stream and the OpenAI chat endpoint,
checked through the JSON export, as a user runs it."""
import json, subprocess, sys

import pytest

import triton_servers as ts

SLEEP, N = 0.02, 12
FAKE = f'''
import time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            mt = pb_utils.get_input_tensor_by_name(r, "max_tokens")
            n = int(mt.as_numpy().reshape(-1)[0]) if mt is not None else 4
            sender = r.get_response_sender()
            for i in range(n):
                time.sleep({SLEEP})
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("text_output", np.array([" tok"], dtype=object))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''
CONFIG = '''backend: "python"
model_transaction_policy { decoupled: true }
instance_group [{ count: 2 kind: KIND_CPU }]
input [{ name: "text_input" data_type: TYPE_STRING dims: [1] },
       { name: "max_tokens" data_type: TYPE_INT32 dims: [1] optional: true }]
output [{ name: "text_output" data_type: TYPE_STRING dims: [1] }]'''


def genai_perf(*flags, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', 'triton_mini', 'genai-perf', 'profile', *flags], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope='module')
def served(launch_module, tmp_path_factory):
    repo = tmp_path_factory.mktemp('genai')
    (repo / 'fake_llm' / '1').mkdir(parents=True)
    (repo / 'fake_llm' / '1' / 'model.py').write_text(FAKE)
    (repo / 'fake_llm' / 'config.pbtxt').write_text(CONFIG)
    openai_port = ts.free_port()
    server = launch_module.mini_process(repo, f'--openai-port={openai_port}', grpc=False, metrics=False)
    def up():
        try: return ts.http(openai_port, 'GET', '/v1/models', timeout=5)[0] == 200
        except OSError: return False
    ts.wait_until(up, 60, 'the OpenAI port')
    return server, openai_port


@pytest.mark.slow
@pytest.mark.parametrize('endpoint', ['kserve', 'chat'])
def test_profile_streaming(served, tmp_path, endpoint):
    server, openai_port = served
    port = server.http_port if endpoint == 'kserve' else openai_port
    out = tmp_path / 'export.json'
    r = genai_perf('-m', 'fake_llm', '--url', f'localhost:{port}', '--endpoint-type', endpoint, '--streaming',
                   '--concurrency', '2', '--request-count', '6', '--synthetic-input-tokens-mean', '40',
                   '--synthetic-input-tokens-stddev', '5', '--output-tokens-mean', str(N), '--random-seed', '3',
                   '--profile-export-file', str(out))
    assert r.returncode == 0, r.stderr
    for row in ('Time to first token (ms)', 'Inter token latency (ms)', 'Request latency (ms)', 'Output sequence length',
                'Input sequence length', 'Output token throughput (per sec)', 'Request throughput (per sec)'):
        assert row in r.stdout
    m = json.loads(out.read_text())
    assert m['output_sequence_length']['min'] == m['output_sequence_length']['max'] == N
    assert m['time_to_first_token']['max'] < m['request_latency']['min']
    # at least the model's sleep between tokens; at most what genai-perf's definition allows from the other rows,
    # (request latency - TTFT) / (tokens - 1), however loaded the machine (a fixed 1.5 x SLEEP bound saw 34 ms at load 12)
    assert SLEEP * 1e3 * 0.9 < m['inter_token_latency']['avg'] <= (m['request_latency']['max'] - m['time_to_first_token']['min']) / (N - 1)
    assert m['time_to_first_token']['min'] >= SLEEP * 1e3 * 0.9             # the fake model sleeps before its first token too
    assert m['request_latency']['min'] >= N * SLEEP * 1e3 * 0.9
    assert 30 <= m['input_sequence_length']['avg'] <= 50
    # two streams in flight, N tokens each, one every SLEEP: at most 2 / SLEEP tokens/s
    assert 0.5 * 2 / SLEEP < m['output_token_throughput']['avg'] <= 2 / SLEEP * 1.05
    assert m['request_throughput']['avg'] == pytest.approx(m['output_token_throughput']['avg'] / N)
    assert m['input_config']['endpoint_type'] == endpoint


@pytest.mark.slow
def test_measurement_interval_and_not_streaming_chat(served):
    "Without --streaming the answer's words are its tokens and there is no TTFT; --measurement-interval bounds the run."
    server, openai_port = served
    r = genai_perf('-m', 'fake_llm', '--url', f'localhost:{openai_port}', '--endpoint-type', 'chat',
                   '--measurement-interval', '500', '--output-tokens-mean', '3', '--synthetic-input-tokens-mean', '5')
    assert r.returncode == 0, r.stderr
    assert 'Time to first token' not in r.stdout and 'Request latency (ms)' in r.stdout


@pytest.mark.slow
@pytest.mark.parametrize('flags, says', [
    (['-m', 'nope', '--endpoint-type', 'kserve'], "model 'nope'"),
    (['-m', 'nope', '--endpoint-type', 'chat'], "model 'nope' is not served"),
])
def test_unknown_model_is_one_line(served, flags, says):
    server, openai_port = served
    port = server.http_port if 'kserve' in flags else openai_port
    r = genai_perf(*flags, '--url', f'localhost:{port}', '--streaming')
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and says in r.stderr, r.stderr


def test_server_down_is_one_line():
    r = genai_perf('-m', 'fake_llm', '--url', f'localhost:{ts.free_port()}', '--streaming')
    assert r.returncode == 1 and r.stderr.startswith('error: cannot reach the server') and len(r.stderr.splitlines()) == 1, r.stderr


def test_genai_perf_is_a_client():
    "Like perf, it talks to servers through the protocol only: it imports no part of triton_mini."
    from test_layering import imports_of
    assert imports_of('genai_perf') == set()
