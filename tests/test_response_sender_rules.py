"""A model that is not decoupled answering through its response sender, as Triton 2.51's stub rules it (issue 42; the two
cases Triton's QA response_sender subtest showed triton-mini answering differently, tests/test_triton_python_qa.py):

- a second response raises in the model ("... cannot send more than one response."), and when that ends `execute`
  the request still gets the first response (Triton's gRPC stream writes it and drops the error sent after it);
- in a returned list, `None` marks a request its sender answers (before `execute` returns or later, from a thread),
  batched with a request answered by the list.

In process, thread and process mode; no timing asserts.
"""
import textwrap, threading

import numpy as np
import pytest

from triton_mini.backend import InferenceRequest
from triton_mini.server import TritonServer

from triton_servers import wait_until

IO = ('input [{name: "HOW" data_type: TYPE_INT32 dims: [1]}] output [{name: "OUT" data_type: TYPE_INT32 dims: [1]}] '
      'instance_group [{count: 1 kind: KIND_CPU}]')
MODEL = '''
    import threading, time
    import numpy as np
    import triton_python_backend_utils as pb_utils

    def out(v): return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([[v]], np.int32))])

    class TritonPythonModel:
        def execute(self, requests):
            returned, later = [], []
            for r in requests:
                how = int(pb_utils.get_input_tensor_by_name(r, "HOW").as_numpy().ravel()[0])
                if how == 0: returned.append(out(10)); continue          # answered by the returned list
                s = r.get_response_sender()
                returned.append(None)
                if how == 1: s.send(out(11), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)   # before returning
                elif how == 2: later.append(s)                            # after returning, from a thread
                else:                                                     # two responses: the second raises
                    s.send(out(13))
                    try: s.send(out(99))
                    except Exception as e: pb_utils.Logger.log_error(f"second send: {e}"); raise
            def send_later():
                time.sleep(0.2)
                for s in later: s.send(out(12), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            threading.Thread(target=send_later, daemon=True).start()
            return returned
'''


@pytest.fixture(scope='module', params=['thread', 'process'])
def server(request, tmp_path_factory):
    repo = tmp_path_factory.mktemp('sender')
    for name, extra in (('one', 'max_batch_size: 8'), ('batched', 'max_batch_size: 8 dynamic_batching { max_queue_delay_microseconds: 500000 }')):
        (repo / name / '1').mkdir(parents=True)
        (repo / name / 'config.pbtxt').write_text(f'backend: "python" {extra} {IO}')
        (repo / name / '1' / 'model.py').write_text(textwrap.dedent(MODEL))
    s = TritonServer(repo, python_backend_mode=request.param)
    s.start()
    yield s
    s.stop()


def submit_all(server, model, hows) -> dict:
    "One request per `how`, submitted together: {how: [(OUT or error text, final), ...]} once each has its final response."
    got, lock = {h: [] for h in hows}, threading.Lock()
    def callback(req, resp, final):
        with lock: got[int(req.id)].append((resp.outputs['OUT'].ravel().tolist() if resp.error is None else resp.error.message, final))
    for h in hows:
        server.submit(InferenceRequest(model, {'HOW': np.full((1, 1), h, np.int32)}, id=str(h), response_callback=callback))
    wait_until(lambda: all(got[h] and got[h][-1][1] for h in hows), 30, 'a final response for each request')
    return got


def test_second_response_raises_and_the_first_is_the_answer(server, caplog):
    caplog.set_level('ERROR')
    got = submit_all(server, 'one', [3])
    assert got == {3: [([13], True)]}
    wait_until(lambda: any('second send: Unable to send response. Non-decoupled model cannot send more than one response.'
                           in r.getMessage() for r in caplog.records), 10, 'the exception the model saw, in the log')


def test_none_in_the_returned_list_is_a_request_its_sender_answers(server):
    got = submit_all(server, 'batched', [0, 1, 2])
    assert got == {0: [([10], True)], 1: [([11], True)], 2: [([12], True)]}
