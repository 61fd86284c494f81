"""The `triton_grpc_error` stream mode (issue 42; nbs/08a_grpc.ipynb): a client that opens ModelStreamInfer with the
header `triton_grpc_error: true` sees the first error of a model end the stream with that error's gRPC status, on
both gRPC transports, as on real Triton 2.51 (observed with tritonclient.grpc's stream API, compared live below):
the responses before it arrive, nothing after it, and a request sent after it fails in the client. An error found
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
CONFIG = 'backend: "python"\ninput [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]\noutput [{ name: "OUT" data_type: TYPE_FP32 dims: [1] }]\n'
CASES = {   # (header value, what the stream is sent: a number for `fails`, None for a request to an unknown model)
    'model error': ('true', [1, -1, 2]),
    'unknown model': ('true', [1, None, 2]),
    'header TRUE': ('TRUE', [1, -1, 2]),
    'no header': (None, [1, -1, 2]),
}
# What real Triton 2.51 does (observed): each callback as (output, (status, message)), and 'send failed' for a request the client could not send
EXPECTED = {
    'model error': [([2.0], None), (None, ('StatusCode.INTERNAL', 'negative input')), 'send failed'],
    'unknown model': [([2.0], None), (None, (None, "Request for unknown model: 'nope' is not found")), ([4.0], None)],
    'header TRUE': [([2.0], None), (None, (None, 'negative input')), ([4.0], None)],
    'no header': [([2.0], None), (None, (None, 'negative input')), ([4.0], None)],
}


@pytest.fixture
def repo(tmp_path):
    (tmp_path / 'models' / 'fails' / '1').mkdir(parents=True)
    (tmp_path / 'models' / 'fails' / '1' / 'model.py').write_text(FAILS)
    (tmp_path / 'models' / 'fails' / 'config.pbtxt').write_text(CONFIG)
    return tmp_path / 'models'


def run(port:int, case:str) -> list:
    "What tritonclient's stream API reports, in order: each callback, and a request it could not send."
    header, xs = CASES[case]
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
            try: c.async_stream_infer('fails' if x is not None else 'nope', [i])
            except grpcclient.InferenceServerException: got.put('send failed')
            time.sleep(0.5)   # one at a time: the order of the callbacks is the servers' only
    finally: c.stop_stream(cancel_requests=False); c.close()
    while not got.empty(): out.append(got.get())
    return out


@pytest.mark.parametrize('transport', ['h2', 'grpcio'])
def test_grpc_error_mode(mini_process, repo, transport):
    m = mini_process(repo, f'--grpc-transport={transport}')
    assert {case: run(m.grpc_port, case) for case in CASES} == EXPECTED


@pytest.mark.oracle
def test_tritons_grpc_error_mode_is_what_the_test_above_expects(real_triton, repo):
    t = real_triton(repo)
    assert {case: run(t.grpc_port, case) for case in CASES} == EXPECTED
