"""Triton's example backend `repeat` (triton-inference-server/repeat_backend, src/repeat.cc; the QA container's
libtriton_repeat.so, which serves src/test/models/repeat_int32) as a Python-based backend:
`--backend-directory=tests/qa_backends` serves models whose config says `backend: "repeat"` with it. Behaviour as the
C++ backend's:

- the config must have max_batch_size 0, inputs IN (INT32, one dimension), DELAY (UINT32, IN's dims), WAIT (UINT32,
  [1]) and outputs OUT (INT32, [1]), IDX (UINT32, [1]), in that order; the C++ texts when not;
- execute takes at most one request ("repeat backend does not support batched request execution");
- per request: WAIT must hold one element and IN and DELAY the same shape, or the request gets one error response
  (final) with the C++ text; otherwise a detached thread, for each element e of IN, sleeps DELAY[e] ms and sends a
  response OUT=[IN[e]], IDX=[e] (flags 0), then sends the final flag alone (TRITONBACKEND_ResponseFactorySendFlags);
- execute sleeps WAIT ms before releasing the request and returning, whatever the thread is doing.
Responses go through the request's response factory as TRITONBACKEND_ResponseSend does: to the core request (the
sender's, with triton_mini.pb_utils.to_core_response: a test backend of triton-mini's, in either Python backend mode), not
through pb_utils' sender's own send, whose Python-backend rule 'Non-decoupled model cannot send more than one response' the C++
backend does not have (the QA's repeat_int32_non_decoupled relies on it sending four responses on a model that is not
decoupled). The C++ backend has no cancellation check (it sends every response whatever happens to the request), and
neither does this port. Not ported: the C++ logging and GPU output buffers (a CPU-only server).
"""
import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils
from triton_mini.pb_utils import to_core_response   # what TRITONBACKEND_ResponseSend hands the core (docstring)


def _dims(t): return [int(d) for d in t.get('dims', [])]


def _check_config(config):
    "ModelState::ValidateModelConfig, with its error texts."
    if int(config.get('max_batch_size', 0)) != 0:
        raise pb_utils.TritonModelException('repeat backend only supports models with max_batch_size == 0')
    inputs, outputs = config.get('input', []), config.get('output', [])
    if len(inputs) != 3: raise pb_utils.TritonModelException(f'expected 3 inputs, got {len(inputs)}')
    if len(outputs) != 2: raise pb_utils.TritonModelException(f'expected 2 outputs, got {len(outputs)}')
    (i, d, w), (o, x) = inputs, outputs
    for t, want, what in ((i, 'IN', 'first input'), (d, 'DELAY', 'second input'), (w, 'WAIT', 'third input'),
                          (o, 'OUT', 'first output'), (x, 'IDX', 'second output')):
        if t['name'] != want: raise pb_utils.TritonModelException(f"expected {what} tensor name to be {want}, got {t['name']}")
    shape = lambda t: '[' + ','.join(map(str, _dims(t))) + ']'
    if len(_dims(i)) != 1: raise pb_utils.TritonModelException(f'expected IN shape to have one dimension, got {shape(i)}')
    if _dims(i) != _dims(d): raise pb_utils.TritonModelException(f'expected IN and DELAY shape to match, got {shape(i)} and {shape(d)}')
    for t, name in ((w, 'WAIT'), (o, 'OUT'), (x, 'IDX')):
        if _dims(t) != [1]: raise pb_utils.TritonModelException(f'expected {name} shape to be [1], got {shape(t)}')
    for t, name, want in ((i, 'IN', 'INT32'), (d, 'DELAY', 'UINT32'), (w, 'WAIT', 'UINT32'), (o, 'OUT', 'INT32'), (x, 'IDX', 'UINT32')):
        if t['data_type'] != f'TYPE_{want}':
            raise pb_utils.TritonModelException(f"expected {name} datatype to be {want}, got {t['data_type']}")


class _Factory:
    "TRITONBACKEND_ResponseFactory: sends straight to the core request (no pb_utils decoupled rule)."
    def __init__(self, request):
        sender = request.get_response_sender()
        self._core, self._keep = sender._core, sender._keep

    def send(self, response, final):
        self._core.send(None if response is None else to_core_response(response, self._keep), final)


class TritonPythonModel:
    def initialize(self, args):
        _check_config(json.loads(args['model_config']))
        self._threads = []

    def execute(self, requests):
        if len(requests) > 1:
            raise pb_utils.TritonModelException('repeat backend does not support batched request execution')
        wait_ms = 0
        for request in requests: wait_ms = self._process(request)
        time.sleep(wait_ms / 1000)
        return None

    def _process(self, request) -> int:
        "ProcessRequest: check the request, start its response thread; the WAIT milliseconds (0 when refused)."
        factory = _Factory(request)
        def refuse(text):
            factory.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(text)), True)
            return 0
        wait = pb_utils.get_input_tensor_by_name(request, 'WAIT')
        if wait is None: return refuse("input tensor 'WAIT' is not found")
        wait = wait.as_numpy().ravel()
        if wait.size != 1: return refuse('unexpected size for WAIT input')
        x, delay = (pb_utils.get_input_tensor_by_name(request, n) for n in ('IN', 'DELAY'))
        if x is None: return refuse("input tensor 'IN' is not found")
        if delay is None: return refuse("input tensor 'DELAY' is not found")
        x, delay = x.as_numpy(), delay.as_numpy()
        if x.shape != delay.shape:
            s = lambda a: '[' + ','.join(map(str, a.shape)) + ']'
            return refuse(f'expected IN and DELAY shape to match, got {s(x)} and {s(delay)}')
        t = threading.Thread(target=self._respond, args=(factory, x.ravel().copy(), delay.ravel().copy()), daemon=True)
        self._threads.append(t)
        t.start()
        return int(wait[0])

    def _respond(self, factory, x, delay):
        "ResponseThread: one response per element of IN after its DELAY, then the final flag alone."
        for e in range(x.size):
            time.sleep(int(delay[e]) / 1000)
            try:
                factory.send(pb_utils.InferenceResponse([pb_utils.Tensor('OUT', np.array([x[e]], np.int32)),
                                                         pb_utils.Tensor('IDX', np.array([e], np.uint32))]), False)
            except Exception as err: print(f'failed sending response: {err}', flush=True)   # LOG_IF_ERROR
        try: factory.send(None, True)
        except Exception as err: print(f'failed sending final response: {err}', flush=True)

    def finalize(self):
        "~ModelInstanceState: wait for the response threads."
        for t in self._threads: t.join()
