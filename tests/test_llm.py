"""Seed 003 end to end: the GGUF model through llama.cpp behind the Python backend, over infer, generate and
generate_stream; the seed's curl commands verbatim; streaming that really streams; the error cases."""
import http.client, json, shutil, subprocess, sys, time, urllib.error, urllib.request
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip('llama_cpp')
from triton_mini.cli import example_repository, wait_for_http
from triton_mini.llm import write_tiny_gguf
from triton_mini.server import TritonServer
from triton_mini.tensors import TritonError
from triton_servers import PortsTaken, ports_taken

PROMPT = '请用中文介绍人工智能'
SEED_INFER = ('{"inputs": [{"name": "prompt", "shape": [1], "datatype": "BYTES", "data": ["请用中文介绍人工智能"]}],'
              ' "outputs": [{"name": "generated_text"}]}')


def test_bundled_model_is_what_write_tiny_gguf_writes(tmp_path):
    bundled = example_repository() / 'qwen_gguf' / '1' / 'model.gguf'
    assert write_tiny_gguf(tmp_path / 'm.gguf').read_bytes() == bundled.read_bytes()
    assert write_tiny_gguf(tmp_path / 'other.gguf', seed=1).read_bytes() != bundled.read_bytes()
    assert (example_repository() / 'qwen_gguf_stream' / '1' / 'model.gguf').read_bytes() == bundled.read_bytes()


SEED_PORTS = ("ports {} are taken (a triton-mini left running, as the README's first command leaves it?): "
              "seed 003's curl commands name 8000 and 8002 verbatim")


def test_seed_003_curl_commands_verbatim(mini_process):
    "`triton-mini` with no flags, then seed 003's four curl commands exactly as the seed prints them."
    if taken := ports_taken(8000, 8002): pytest.skip(SEED_PORTS.format(taken))
    try: s = mini_process(grpc=False, fixed_ports=True, wait='live')
    except PortsTaken: pytest.skip(SEED_PORTS.format('8000/8002'))   # taken between the check and the start
    assert wait_for_http('http://127.0.0.1:8000/v2/health/live', 120)
    curl = lambda *a: subprocess.run(['curl', '-s', *a], capture_output=True, text=True, timeout=120)
    ready = subprocess.run(['curl', '-v', 'localhost:8000/v2/health/ready'], capture_output=True, text=True, timeout=60)
    assert '< HTTP/1.1 200 OK' in ready.stderr
    models = json.loads(curl('localhost:8000/v2/models').stdout)
    assert {'name': 'qwen_gguf', 'version': '1', 'state': 'READY'} in models['models']
    out = json.loads(curl('-X', 'POST', 'http://localhost:8000/v2/models/qwen_gguf/infer', '-H', 'Content-Type: application/json',
                          '-d', SEED_INFER).stdout)
    assert out['model_name'] == 'qwen_gguf' and out['outputs'][0]['name'] == 'generated_text'
    assert out['outputs'][0]['datatype'] == 'BYTES' and len(out['outputs'][0]['data'][0]) > 0
    metrics = curl('localhost:8002/metrics').stdout
    assert 'nv_inference_request_success{model="qwen_gguf",version="1"} 1' in metrics
    assert s.stop() == 0


@pytest.fixture(scope='module')
def served(tmp_path_factory, launch_module):
    "The two bundled LLM models plus a slower one (51 MB, 8 layers) whose tokens take measurable time."
    root = tmp_path_factory.mktemp('llm') / 'models'
    for name in ('qwen_gguf', 'qwen_gguf_stream'): shutil.copytree(example_repository() / name, root / name, symlinks=True)
    big = root / 'slow_stream'
    shutil.copytree(example_repository() / 'qwen_gguf_stream', big, symlinks=False)
    (big / '1' / 'model.gguf').unlink()
    write_tiny_gguf(big / '1' / 'model.gguf', n_ctx=512, n_layer=8, n_embd=512, n_head=8, n_ff=1376)
    cfg = big / 'config.pbtxt'
    cfg.write_text(cfg.read_text().replace('name: "qwen_gguf_stream"', 'name: "slow_stream"'))
    mini = launch_module.mini(root, metrics=False)
    assert mini.failures == {}
    return mini.server, f'127.0.0.1:{mini.http_port}'


def post(url, path, doc):
    req = urllib.request.Request(f'http://{url}{path}', data=json.dumps(doc).encode(), method='POST')
    try:
        with urllib.request.urlopen(req, timeout=120) as r: return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e: return e.code, json.loads(e.read())


def greedy(server, prompt=PROMPT, n=24):
    return server.infer('qwen_gguf', {'prompt': [prompt], 'max_tokens': np.array([n], np.int32),
                                      'temperature': np.array([0.0], np.float32)})['generated_text'][0].decode()


def test_infer_generate_and_stream_agree(served):
    server, url = served
    text = greedy(server)
    assert len(text) == 24
    status, out = post(url, '/v2/models/qwen_gguf/infer', {
        'inputs': [{'name': 'prompt', 'shape': [1], 'datatype': 'BYTES', 'data': [PROMPT]},
                   {'name': 'max_tokens', 'shape': [1], 'datatype': 'INT32', 'data': [24]}],
        'parameters': {'temperature': 0}})
    assert status == 200 and out['outputs'][0]['data'] == [text]            # temperature as a request parameter
    status, g = post(url, '/v2/models/qwen_gguf/generate', {'prompt': PROMPT, 'max_tokens': 24, 'temperature': 0, 'id': 'x'})
    assert status == 200 and g == {'generated_text': text, 'id': 'x', 'model_name': 'qwen_gguf', 'model_version': '1',
                                   'prompt_tokens': g['prompt_tokens'], 'completion_tokens': 24}   # llama.cpp's counts
    assert g['prompt_tokens'] > 0
    status, g = post(url, '/v2/models/qwen_gguf/generate', {'prompt': PROMPT, 'parameters': {'max_tokens': 24, 'temperature': 0}})
    assert g['generated_text'] == text                                       # fields inside "parameters" map too
    req = urllib.request.Request(f'http://{url}/v2/models/qwen_gguf_stream/generate_stream', method='POST',
                                 data=json.dumps({'prompt': PROMPT, 'max_tokens': 24, 'temperature': 0}).encode())
    with urllib.request.urlopen(req) as r:
        assert r.headers['Content-Type'] == 'text/event-stream; charset=utf-8'
        events = [json.loads(l[6:]) for l in r if l.startswith(b'data: ')]
    assert ''.join(e['generated_text'] for e in events) == text and len(events) > 1


def test_stop_strings_cut_the_text(served):
    server, url = served
    text = greedy(server, n=24)
    stop = text[5:7]
    status, g = post(url, '/v2/models/qwen_gguf/generate', {'prompt': PROMPT, 'max_tokens': 24, 'temperature': 0, 'stop': [stop]})
    assert status == 200 and g['generated_text'] == text[:text.index(stop)]


@pytest.mark.slow
def test_stream_events_arrive_one_by_one(served):
    "Each token's event is written when the model sends it, not all at the end."
    _, url = served
    host, port = url.split(':')
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    start = time.perf_counter()
    conn.request('POST', '/v2/models/slow_stream/generate_stream', body=json.dumps({'prompt': PROMPT, 'max_tokens': 48, 'temperature': 0}))
    resp = conn.getresponse()
    arrivals = []
    while line := resp.fp.readline():
        if line.startswith(b'data: '): arrivals.append(time.perf_counter() - start)
    end = time.perf_counter() - start
    conn.close()
    assert len(arrivals) >= 40
    assert arrivals[0] < 0.5 * end, (arrivals[0], end)                       # the first token long before the last
    gaps = np.diff(arrivals)
    assert (gaps > 0.0005).sum() > len(gaps) // 2, gaps                      # spread over the generation, not one burst


def test_error_cases(served, tmp_path):
    server, url = served
    status, body = post(url, '/v2/models/qwen_gguf/infer', {'inputs': [{'name': 'prompt', 'shape': [1], 'datatype': 'BYTES', 'data': ['']}]})
    assert (status, body) == (400, {'error': 'prompt must not be empty'})
    status, body = post(url, '/v2/models/qwen_gguf/infer', {'inputs': [{'name': 'prompt', 'shape': [1], 'datatype': 'INT32', 'data': [1]}]})
    assert status == 400 and body['error'] == "[request id: <id_unknown>] inference input 'prompt' data-type is 'INT32', but model 'qwen_gguf' expects 'BYTES'"
    status, body = post(url, '/v2/models/qwen_gguf/generate', {'prompt': 'hi', 'temperature': -1})
    assert status == 400 and 'temperature >= 0' in body['error']
    status, body = post(url, '/v2/models/qwen_gguf_stream/infer', {'inputs': [{'name': 'prompt', 'shape': [1], 'datatype': 'BYTES', 'data': ['hi']}]})
    assert (status, body) == (501, {'error': "HTTP end point doesn't support models with decoupled transaction policy"})


def test_missing_model_file_is_unavailable_with_a_reason(tmp_path):
    root = tmp_path / 'models'
    shutil.copytree(example_repository() / 'qwen_gguf', root / 'qwen_gguf')
    (root / 'qwen_gguf' / '1' / 'model.gguf').unlink()
    server = TritonServer(root)
    failures = server.start()
    try:
        assert 'qwen_gguf' in failures
        (entry,) = server.repository_index()
        assert entry['state'] == 'UNAVAILABLE'
        assert entry['reason'].startswith(f"Internal: ValueError: Model path does not exist: {root / 'qwen_gguf' / '1' / 'model.gguf'}")
        with pytest.raises(TritonError, match="'qwen_gguf' has no available versions"): greedy(server)
    finally: server.stop()


def test_openai_sdk_against_the_bundled_gguf_models(served):
    "Issue 15: the official openai SDK over the OpenAI front end; a per-request seed makes sampled texts reproducible."
    openai = pytest.importorskip('openai')
    from triton_mini.openai_frontend import OpenAIFrontend
    from triton_mini.asgi import HTTPService, bind_socket
    server, _ = served
    with HTTPService({OpenAIFrontend(server): bind_socket('127.0.0.1', 0)}) as svc:
        client = openai.OpenAI(base_url=f'http://127.0.0.1:{svc.ports[0]}/v1', api_key='unused', max_retries=0, timeout=120)
        assert {'qwen_gguf', 'qwen_gguf_stream'} <= {m.id for m in client.models.list()}
        sampled = [client.completions.create(model='qwen_gguf', prompt=PROMPT, max_tokens=16, temperature=1.0, seed=s).choices[0].text
                   for s in (7, 7, 8)]
        assert sampled[0] == sampled[1] and sampled[0] != sampled[2]
        pieces = [c.choices[0].delta.content for c in client.chat.completions.create(
            model='qwen_gguf_stream', messages=[{'role': 'user', 'content': 'hi'}], max_tokens=8, stream=True) if c.choices]
        assert len([p for p in pieces if p]) >= 2          # token by token, not one piece at the end


def shape(value):
    "A JSON value's shape: objects keep their keys, lists their first element's shape, scalars their type name."
    if isinstance(value, dict): return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list): return [shape(value[0])] if value else []
    return 'null' if value is None else 'number' if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__


def raw(port, method, path, doc=None):
    "(status, body text) of one request."
    conn = http.client.HTTPConnection('127.0.0.1', port, timeout=120)
    try:
        conn.request(method, path, body=None if doc is None else json.dumps(doc), headers={'Content-Type': 'application/json'})
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally: conn.close()


def openai_answers(port, model) -> dict:
    "What an OpenAI client sees of each call, as shapes (values differ: the two servers sample differently)."
    chat = {'model': model, 'messages': [{'role': 'user', 'content': 'hi'}], 'max_tokens': 4, 'temperature': 0}
    out = {}
    status, text = raw(port, 'GET', '/v1/models'); out['models'] = (status, shape(json.loads(text)))
    status, text = raw(port, 'POST', '/v1/completions', {'model': model, 'prompt': PROMPT, 'max_tokens': 4, 'temperature': 0})
    out['completion'] = (status, shape(json.loads(text)))
    status, text = raw(port, 'POST', '/v1/chat/completions', chat); out['chat'] = (status, shape(json.loads(text)))
    status, text = raw(port, 'POST', '/v1/chat/completions', {**chat, 'stream': True})
    events = [line[6:] for line in text.splitlines() if line.startswith('data: ')]
    out['chat stream'] = (status, events[-1], shape(json.loads(events[1])))   # a content chunk
    return out


def test_openai_shapes_match_llama_cpp_server(served, tmp_path):
    """Issue 15: the same calls against llama-cpp-python's own server (the anchor a laptop user would pick) on the same
    GGUF give the same shapes: models list, completion, chat completion, a streamed chat chunk and the stream's end."""
    pytest.importorskip('llama_cpp.server.app', reason="llama_cpp.server needs llama-cpp-python's [server] extra")
    from triton_mini.openai_frontend import OpenAIFrontend
    from triton_mini.asgi import HTTPService, bind_socket
    from triton_servers import free_port, popen
    server, _ = served
    gguf = example_repository() / 'qwen_gguf' / '1' / 'model.gguf'
    port = free_port()
    # popen: guarded, so the anchor dies with this process however it ends (issue 41)
    anchor = popen([sys.executable, '-m', 'llama_cpp.server', '--model', str(gguf), '--model_alias', 'qwen_gguf',
                    '--host', '127.0.0.1', '--port', str(port), '--n_ctx', '512', '--verbose', 'false'],
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_http(f'http://127.0.0.1:{port}/v1/models', 120)
        theirs = openai_answers(port, 'qwen_gguf')
        with HTTPService({OpenAIFrontend(server): bind_socket('127.0.0.1', 0)}) as svc:
            ours = openai_answers(svc.ports[0], 'qwen_gguf')
    finally:
        anchor.terminate(); anchor.wait(10)
    # /v1/models: OpenAI's Model object is id, object, created, owned_by; llama_cpp.server leaves out `created` and
    # adds `permissions` (a field OpenAI's API dropped). The rest must be the same.
    (ours_status, ours_models), (their_status, their_models) = ours.pop('models'), theirs.pop('models')
    assert ours_models['data'][0].pop('created') == 'number' and their_models['data'][0].pop('permissions') == []
    assert (ours_status, ours_models) == (their_status, their_models)
    assert ours == theirs   # completion and chat (usage included), a streamed chunk, the stream's [DONE]
