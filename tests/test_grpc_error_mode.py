"""The `triton_grpc_error` stream mode (issue 42; nbs/08a_grpc.ipynb): a client that opens ModelStreamInfer with the
header `triton_grpc_error: true` sees the first error of a model end the stream with that error's gRPC status, on
both gRPC transports, as on real Triton 2.51 (observed with tritonclient.grpc's stream API, compared live below):
the responses before it arrive, nothing after it, and a request sent after it fails in the client; a decoupled
model's error response ends it too. An error found
before the model (an unknown model) stays an error message inside the stream, and the header must say `true` exactly."""
import queue, time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

FAILS = '''
import numpy as np
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            if x[0] < 0: out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("negative input")))
            else: out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x * 2)]))
        return out
'''
STREAMS = '''
import triton_python_backend_utils as pb_utils
class TritonPythonModel:   # decoupled: x, then an error for a negative x, then 2x and the final flag
    def execute(self, requests):
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            s = r.get_response_sender()
            s.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x)]))
            if x[0] < 0: s.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("negative input")))
            s.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x * 2)]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''
CONFIG = 'backend: "python"\ninput [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]\noutput [{ name: "OUT" data_type: TYPE_FP32 dims: [1] }]\n'
CASES = {   # (header value, model, what the stream is sent: a number, or None for a request to an unknown model)
    'model error': ('true', 'fails', [1, -1, 2]),
    'unknown model': ('true', 'fails', [1, None, 2]),
    'header TRUE': ('TRUE', 'fails', [1, -1, 2]),
    'no header': (None, 'fails', [1, -1, 2]),
    'decoupled model error': ('true', 'streams', [1, -1, 2]),
}
# What real Triton 2.51 does (observed): each callback as (output, (status, message)), and 'send failed' for a request the client could not send
EXPECTED = {
    'model error': [([2.0], None), (None, ('StatusCode.INTERNAL', 'negative input')), 'send failed'],
    'unknown model': [([2.0], None), (None, (None, "Request for unknown model: 'nope' is not found")), ([4.0], None)],
    'header TRUE': [([2.0], None), (None, (None, 'negative input')), ([4.0], None)],
    'no header': [([2.0], None), (None, (None, 'negative input')), ([4.0], None)],
    'decoupled model error': [([1.0], None), ([2.0], None), ([-1.0], None), (None, ('StatusCode.INTERNAL', 'negative input')), 'send failed'],
}


@pytest.fixture
def repo(tmp_path):
    (tmp_path / 'models' / 'fails' / '1').mkdir(parents=True)
    (tmp_path / 'models' / 'fails' / '1' / 'model.py').write_text(FAILS)
    (tmp_path / 'models' / 'fails' / 'config.pbtxt').write_text(CONFIG)
    (tmp_path / 'models' / 'streams' / '1').mkdir(parents=True)
    (tmp_path / 'models' / 'streams' / '1' / 'model.py').write_text(STREAMS)
    (tmp_path / 'models' / 'streams' / 'config.pbtxt').write_text('model_transaction_policy { decoupled: true }\n' + CONFIG)
    return tmp_path / 'models'


def run(port:int, case:str) -> list:
    "What tritonclient's stream API reports, in order: each callback, and a request it could not send."
    header, model, xs = CASES[case]
    got, c = queue.Queue(), grpcclient.InferenceServerClient(f'localhost:{port}')
    def callback(result, error):
        got.put((None if result is None else result.as_numpy('OUT').tolist(),
                 None if error is None else (error.status(), error.message())))
    c.start_stream(callback=callback, headers={'triton_grpc_error': header} if header else None)
    out = []
    try:
        for x in xs:
            i = grpcclient.InferInput('IN', [1], 'FP32')
            i.set_data_from_numpy(np.array([x or 0], np.float32))
            try: c.async_stream_infer(model if x is not None else 'nope', [i])
            except grpcclient.InferenceServerException: got.put('send failed')
            out.append(got.get(timeout=30))   # one at a time: each request's first callback before the next is sent
            time.sleep(0.1)                   # its other callbacks, and a stream's end, reach the client
            while not got.empty(): out.append(got.get())
    finally: c.stop_stream(cancel_requests=False); c.close()
    return out


@pytest.mark.parametrize('transport', ['h2', 'grpcio'])
def test_grpc_error_mode(mini_process, repo, transport):
    m = mini_process(repo, f'--grpc-transport={transport}')
    assert {case: run(m.grpc_port, case) for case in CASES} == EXPECTED
    assert run(m.grpc_port, 'model error') == EXPECTED['model error']   # and serves on (Triton 2.51 does not: below)


@pytest.mark.oracle
@pytest.mark.parametrize('case', CASES)
def test_tritons_grpc_error_mode_is_what_the_test_above_expects(real_triton, repo, case):
    """A Triton per case: after a stream ended by an error, Triton 2.51 sometimes logs `Signal (11) received.` and
    dies (seen here after the decoupled case every time, after the others now and then): a bug of Triton's, not
    reproduced (the test above checks that triton-mini serves on)."""
    assert run(real_triton(repo).grpc_port, case) == EXPECTED[case]
