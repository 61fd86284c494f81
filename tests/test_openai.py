"""The OpenAI-compatible front end (issue 15, stage 1), driven by the official `openai` SDK: models, completions,
chat completions (streamed: the tokens arrive spread over time), OpenAI-shaped errors, cancellation on disconnect."""
import json, os, time
from pathlib import Path

import pytest

openai = pytest.importorskip('openai', reason='the openai SDK (a dev dependency) is not installed')

WORDS = '''
import json, os, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args): self.dir = args["model_repository"]
    def execute(self, requests):
        for r in requests:
            prompt = pb_utils.get_input_tensor_by_name(r, "text_input").as_numpy().reshape(-1)[0].decode()
            mt = pb_utils.get_input_tensor_by_name(r, "max_tokens")
            limit = int(mt.as_numpy().reshape(-1)[0]) if mt is not None else 200
            sender, n = r.get_response_sender(), 0
            while n < limit and not sender.is_cancelled():
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("text_output", np.array([f"w{n} "], dtype=object))]))
                n += 1
                time.sleep(0.02)
            with open(os.path.join(self.dir, "made.tmp"), "w") as f: f.write(str(n))
            os.replace(os.path.join(self.dir, "made.tmp"), os.path.join(self.dir, "made"))   # whole, or not there
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''
ECHO = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            p = pb_utils.get_input_tensor_by_name(r, "prompt").as_numpy().reshape(-1)[0]
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("generated_text", np.array([p.upper()], dtype=object)),
                                                   pb_utils.Tensor("completion_tokens", np.array([7], np.int32))]))
        return out
'''


def write(repo, name, code, config):
    (repo / name / '1').mkdir(parents=True)
    (repo / name / '1' / 'model.py').write_text(code)
    (repo / name / 'config.pbtxt').write_text(config)


@pytest.fixture(scope='module', params=['thread', 'process'])
def endpoint(request, tmp_path_factory):
    from triton_mini.server import TritonServer
    from triton_mini.openai_frontend import OpenAIFrontend
    from triton_mini.asgi import HTTPService, bind_socket
    repo = tmp_path_factory.mktemp('openai')
    write(repo, 'words', WORDS, '''backend: "python"
model_transaction_policy { decoupled: true }
input [{ name: "text_input" data_type: TYPE_STRING dims: [1] }, { name: "max_tokens" data_type: TYPE_INT32 dims: [1] optional: true }]
output [{ name: "text_output" data_type: TYPE_STRING dims: [1] }]''')
    write(repo, 'echo', ECHO, '''backend: "python"
input [{ name: "prompt" data_type: TYPE_STRING dims: [1] }]
output [{ name: "generated_text" data_type: TYPE_STRING dims: [1] }, { name: "completion_tokens" data_type: TYPE_INT32 dims: [1] }]''')
    (repo / 'add' / '1').mkdir(parents=True)
    (repo / 'add' / 'config.pbtxt').write_text('backend: "identity"\ninput [{ name: "X" data_type: TYPE_FP32 dims: [1] }]\noutput [{ name: "Y" data_type: TYPE_FP32 dims: [1] }]')
    server = TritonServer(repo, python_backend_mode=request.param)
    server.start()
    service = HTTPService({OpenAIFrontend(server): bind_socket('127.0.0.1', 0)}).start()
    client = openai.OpenAI(base_url=f'http://127.0.0.1:{service.ports[0]}/v1', api_key='unused', max_retries=0, timeout=30)
    yield client, repo
    service.stop(); server.stop()


def test_models_lists_the_text_models(endpoint):
    client, _ = endpoint
    assert sorted(m.id for m in client.models.list()) == ['echo', 'words']     # `add` takes no prompt
    assert client.models.retrieve('words').id == 'words'


def test_completion_and_usage(endpoint):
    client, _ = endpoint
    r = client.completions.create(model='words', prompt='hello', max_tokens=3)
    assert (r.choices[0].text, r.choices[0].finish_reason, r.usage.completion_tokens) == ('w0 w1 w2 ', 'length', 3)
    e = client.completions.create(model='echo', prompt='quiet please')
    assert (e.choices[0].text, e.choices[0].finish_reason, e.usage.completion_tokens) == ('QUIET PLEASE', 'stop', 7)


def test_chat_completion(endpoint):
    client, _ = endpoint
    r = client.chat.completions.create(model='echo', messages=[{'role': 'user', 'content': 'hi'}])
    assert r.choices[0].message.role == 'assistant' and r.usage.completion_tokens == 7    # as the model reported
    assert r.choices[0].message.content == '<|IM_START|>USER\nHI<|IM_END|>\n<|IM_START|>ASSISTANT\n'   # ChatML, upper-cased


def test_streamed_chat_arrives_token_by_token(endpoint):
    client, _ = endpoint
    stream = client.chat.completions.create(model='words', messages=[{'role': 'user', 'content': 'go'}], max_tokens=10,
                                            stream=True, stream_options={'include_usage': True})
    arrivals, text, finish, usage = [], '', None, None
    for chunk in stream:
        if chunk.choices:
            delta = chunk.choices[0].delta.content
            if delta: arrivals.append(time.monotonic()); text += delta
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage: usage = chunk.usage
    assert text == ''.join(f'w{i} ' for i in range(10)) and finish == 'length' and usage.completion_tokens == 10
    assert arrivals[-1] - arrivals[0] > 0.1      # 10 tokens 20 ms apart: spread over time, not all at the end


def test_errors_are_openai_shaped(endpoint):
    client, _ = endpoint
    with pytest.raises(openai.NotFoundError) as e: client.chat.completions.create(model='nope', messages=[{'role': 'user', 'content': 'x'}])
    assert e.value.body['code'] == 'model_not_found'
    with pytest.raises(openai.BadRequestError, match='temperature'): client.completions.create(model='words', prompt='x', temperature=5)
    with pytest.raises(openai.BadRequestError, match='messages'): client.chat.completions.create(model='words', messages=[])
    with pytest.raises(openai.BadRequestError, match='text prompt'): client.completions.create(model='add', prompt='x')


def test_a_client_that_leaves_mid_stream_stops_the_model(endpoint):
    "Issue 15's check: disconnect after 3 tokens of a 200-token generation; the model stops early (under 60 tokens)."
    client, repo = endpoint
    made = repo / 'words' / 'made'
    made.unlink(missing_ok=True)
    stream = client.completions.create(model='words', prompt='long', max_tokens=200, stream=True)
    for i, _ in zip(range(3), stream): pass
    stream.close()
    t = time.monotonic()
    while not made.exists() and time.monotonic() - t < 10: time.sleep(0.01)
    # the model's own count, not a stopwatch: 200 tokens asked, 20 ms apart; stopping within ~1 s of the disconnect
    # leaves it under 60 (a model that runs on makes all 200)
    assert made.exists(), 'the model did not stop within 10 s'
    assert int(made.read_text()) < 60


def test_a_gguf_files_chat_template_is_used(tmp_path):
    "The template in the GGUF's metadata (tokenizer.chat_template) makes the chat prompt; found after other metadata."
    gguf = pytest.importorskip('gguf')
    from triton_mini.openai_frontend import gguf_metadata_string, text_model, chat_prompt, check_messages
    from triton_mini.server import TritonServer
    write(tmp_path, 'echo', ECHO, '''backend: "python"
input [{ name: "prompt" data_type: TYPE_STRING dims: [1] }]
output [{ name: "generated_text" data_type: TYPE_STRING dims: [1] }]''')
    w = gguf.GGUFWriter(str(tmp_path / 'echo' / '1' / 'model.gguf'), 'llama')
    w.add_array('tokenizer.ggml.tokens', [f'tok{i}' for i in range(1000)])     # values before the template are skipped
    w.add_uint32('some.count', 7)
    w.add_chat_template("{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
                        "{% if add_generation_prompt %}[assistant] {% endif %}")
    w.write_header_to_file(); w.write_kv_data_to_file(); w.close()
    assert gguf_metadata_string(tmp_path / 'echo' / '1' / 'model.gguf', 'some.missing') is None
    with TritonServer(tmp_path) as server:
        server.start()
        tm = text_model(server.repository.get('echo', -1))
        assert chat_prompt(tm, check_messages([{'role': 'user', 'content': 'hi'}])) == '[user] hi\n[assistant] '


def test_no_usage_is_made_up(tmp_path):
    "A model that answers with one response and reports no counts gets no usage (the front end has no tokenizer)."
    from triton_mini.server import TritonServer
    from triton_mini.openai_frontend import OpenAIFrontend
    from triton_mini.asgi import call_asgi
    import asyncio, json
    write(tmp_path, 'plain', ECHO.replace(', pb_utils.Tensor("completion_tokens", np.array([7], np.int32))', ''), '''backend: "python"
input [{ name: "prompt" data_type: TYPE_STRING dims: [1] }]
output [{ name: "generated_text" data_type: TYPE_STRING dims: [1] }]''')
    with TritonServer(tmp_path) as server:
        server.start()
        status, _, body = asyncio.run(call_asgi(OpenAIFrontend(server), 'POST', '/v1/completions', b'{"model": "plain", "prompt": "a b c"}'))
    doc = json.loads(body)
    assert status == 200 and doc['choices'][0]['text'] == 'A B C' and 'usage' not in doc


def test_a_full_queue_is_an_honest_503(tmp_path):
    "One instance busy, a queue of one: the third concurrent request is refused with 503 (the SDK's retryable status)."
    import threading
    from triton_mini.server import TritonServer
    from triton_mini.openai_frontend import OpenAIFrontend
    from triton_mini.asgi import HTTPService, bind_socket
    write(tmp_path, 'words', WORDS, '''backend: "python"
model_transaction_policy { decoupled: true }
input [{ name: "text_input" data_type: TYPE_STRING dims: [1] }, { name: "max_tokens" data_type: TYPE_INT32 dims: [1] optional: true }]
output [{ name: "text_output" data_type: TYPE_STRING dims: [1] }]
dynamic_batching { default_queue_policy { max_queue_size: 1 } }''')
    with TritonServer(tmp_path) as server:
        server.start()
        with HTTPService({OpenAIFrontend(server): bind_socket('127.0.0.1', 0)}) as svc:
            client = openai.OpenAI(base_url=f'http://127.0.0.1:{svc.ports[0]}/v1', api_key='x', max_retries=0)
            results = []
            def one():
                try: results.append(client.completions.create(model='words', prompt='p', max_tokens=25).choices[0].text)
                except openai.APIStatusError as e: results.append((e.status_code, e.body.get('code')))
            threads = [threading.Thread(target=one) for _ in range(3)]
            for t in threads: t.start(); time.sleep(0.1)
            for t in threads: t.join(30)
    assert (503, 'queue_full') in results and sum(isinstance(r, str) for r in results) == 2, results


# ------------------------------------------------------------------------------------------------- bad values (issue 40, M4 and L5)

BASE = {'/v1/chat/completions': {'model': 'words', 'messages': [{'role': 'user', 'content': 'hi'}], 'max_tokens': 2},
        '/v1/completions': {'model': 'words', 'prompt': 'hi', 'max_tokens': 2}}
NAN, INF = float('nan'), float('inf')
BAD_EITHER = {   # field -> values both endpoints refuse (JSON's NaN and Infinity, numbers past any float, booleans)
    'max_tokens': [2**31, 0, -1, 1.5, True, '5', NAN, INF, 10**400],
    'max_completion_tokens': [2**31, 0, NAN, False],
    'n': [0, 2, 1.5, True, 10**400, NAN],
    'temperature': [NAN, INF, -INF, -0.1, 2.5, True, '1', 1e400],
    'top_p': [NAN, 1.5, -0.1, False],
    'frequency_penalty': [NAN, 3, -2.01, True],
    'presence_penalty': [INF, -2.5, '0'],
    'seed': [2**63, -2**63 - 1, 1.5, True, NAN],
    'stop': [5, [1], ['a'] * 5, {'x': 1}],
    'stream': ['yes', 1, 0],
    'stream_options': ['x', {'include_usage': 'yes'}],
    'logit_bias': [[], {'x': 1}, {'1': 101}, {'1': NAN}, {'1': True}],
    'user': [5],
}
BAD_CHAT = {'logprobs': [1, 'true'], 'top_logprobs': [21, -1, NAN, True]}
BAD_COMPLETIONS = {'logprobs': [6, -1, True, NAN], 'best_of': [0, 21, True], 'echo': [1, 'yes'], 'suffix': [3]}
CASES = [(path, field, value) for path in BASE for field, values in
         [*BAD_EITHER.items(), *(BAD_CHAT if 'chat' in path else BAD_COMPLETIONS).items()] for value in values]


@pytest.fixture(scope='module')
def served(launch_module, tmp_path_factory):
    "`triton-mini --openai-port` as a process: its log is what an operator reads (no traceback for a client's mistake)."
    import triton_servers as ts
    repo = tmp_path_factory.mktemp('openai-bad')
    write(repo, 'words', WORDS, '''backend: "python"
model_transaction_policy { decoupled: true }
input [{ name: "text_input" data_type: TYPE_STRING dims: [1] }, { name: "max_tokens" data_type: TYPE_INT32 dims: [1] optional: true }]
output [{ name: "text_output" data_type: TYPE_STRING dims: [1] }]''')
    write(repo, 'seeded', WORDS,   # declares seed an INT32 input (and ignores it)
          '''backend: "python"
model_transaction_policy { decoupled: true }
input [{ name: "text_input" data_type: TYPE_STRING dims: [1] }, { name: "max_tokens" data_type: TYPE_INT32 dims: [1] optional: true },
       { name: "seed" data_type: TYPE_INT32 dims: [1] optional: true }]
output [{ name: "text_output" data_type: TYPE_STRING dims: [1] }]''')
    write(repo, 'echo', ECHO, '''backend: "python"
input [{ name: "prompt" data_type: TYPE_STRING dims: [1] }]
output [{ name: "generated_text" data_type: TYPE_STRING dims: [1] }, { name: "completion_tokens" data_type: TYPE_INT32 dims: [1] }]''')
    port = ts.free_port()
    server = launch_module.mini_process(repo, f'--openai-port={port}', grpc=False, metrics=False)
    def up():
        try: return ts.http(port, 'GET', '/v1/models', timeout=5)[0] == 200
        except OSError: return False
    ts.wait_until(up, 60, 'the OpenAI port')
    return server, port


def post(port, path, body):
    import triton_servers as ts
    status, _, text = ts.http(port, 'POST', path, body if isinstance(body, bytes) else json.dumps(body).encode(),
                              headers={'Content-Type': 'application/json'})
    return status, json.loads(text)


def refused(doc, param) -> bool:
    "OpenAI's error shape, as the front end's other 400s answer: the field named in `param` and in the message."
    e = doc.get('error', {})
    return (set(e) == {'message', 'type', 'param', 'code'} and e['type'] == 'invalid_request_error'
            and e['param'] == param and e['code'] is None and f"'{param}'" in e['message'])


@pytest.mark.parametrize('path, field, value', CASES, ids=[f"{'chat' if 'chat' in p else 'completions'}-{f}-{json.dumps(v)[:20]}" for p, f, v in CASES])
def test_a_bad_value_is_a_400_naming_its_field(served, path, field, value):
    server, port = served
    status, doc = post(port, path, {**BASE[path], field: value})
    assert status == 400 and refused(doc, field), doc
    assert 'Traceback' not in server.log()


def test_a_value_past_the_models_declared_datatype_is_a_400(served):
    "`seed` is bounded by 64 bits; a model that declares it INT32 takes less, and the front end says so."
    server, port = served
    status, doc = post(port, '/v1/completions', {'model': 'seeded', 'prompt': 'hi', 'max_tokens': 2, 'seed': 2**40})
    assert status == 400 and refused(doc, 'seed') and 'INT32' in doc['error']['message'], doc
    status, doc = post(port, '/v1/completions', {'model': 'seeded', 'prompt': 'hi', 'max_tokens': 2, 'seed': 2**31 - 1})
    assert status == 200 and doc['choices'][0]['text'] == 'w0 w1 ', doc
    assert 'Traceback' not in server.log()


def test_unparsable_bodies_are_a_400(served):
    server, port = served
    for body in (b'[' * 100_000, b'{"model": ', b'\xff', b'[1, 2]'):
        status, doc = post(port, '/v1/completions', body)
        assert status == 400 and doc['error']['type'] == 'invalid_request_error' and doc['error']['param'] is None, (body[:10], doc)
    assert 'Traceback' not in server.log()


def test_the_bounds_themselves_are_accepted(served):
    "The ends of every documented range are valid: the checks refuse what is out of range, not what is at its edge."
    server, port = served
    edges = {'temperature': 2, 'top_p': 0, 'frequency_penalty': -2, 'presence_penalty': 2, 'seed': 2**63 - 1, 'n': 1,
             'max_completion_tokens': 3, 'stop': ['x', 'y', 'z', 'w'], 'stream': False, 'stream_options': None,
             'logit_bias': {'50256': -100}, 'user': 'u'}
    status, doc = post(port, '/v1/chat/completions', {**BASE['/v1/chat/completions'], **edges, 'logprobs': False, 'top_logprobs': 20})
    assert status == 200 and doc['choices'][0]['message']['content'] == 'w0 w1 w2 ', doc   # max_completion_tokens wins
    # echo declares no max_tokens or seed input: the largest values go to it as request parameters (64-bit in Triton)
    status, doc = post(port, '/v1/completions', {**BASE['/v1/completions'], **edges, 'model': 'echo', 'max_tokens': 2**31 - 1,
                                                 'max_completion_tokens': None, 'logprobs': 0, 'best_of': 1, 'echo': False})
    assert status == 200 and doc['choices'][0]['text'] == 'HI', doc
    assert 'Traceback' not in server.log()
