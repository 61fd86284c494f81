"""Triton's example backend `square` (triton-inference-server/square_backend; the QA container's libtriton_square.so,
which serves src/test/models/square_int32 in qa/L0_decoupled) as a Python-based backend: `--backend-directory=
tests/qa_backends` serves models whose config says `backend: "square"` with it.

No copy of square_backend's C++ source is at hand here (no mirror of that repository), so this port follows the
semantics of its Python twin, python_backend's examples/decoupled/square_model.py (tag r24.10), which the QA's
`python` trial copies beside the same config and which has the same inputs and outputs:

- the model must be decoupled, IN must be INT32 with dims [1] and OUT INT32 with dims [1] (square_model.py's checks and
  texts);
- per request a detached thread sends n responses, OUT=[n] each (flags 0), n the element of IN, then the final flag
  alone (TRITONBACKEND_ResponseFactorySendFlags); n <= 0 sends the final flag only;
- finalize waits for the response threads.
Responses go through the request's response factory as the repeat port's (tests/qa_backends/repeat): to the core
request, as TRITONBACKEND_ResponseSend does.
"""
import json
import threading

import numpy as np
import triton_python_backend_utils as pb_utils
from triton_mini.pb_utils import to_core_response   # what TRITONBACKEND_ResponseSend hands the core (docstring)


def _check_config(config, name):
    "square_model.py's initialize checks, with its texts."
    if not pb_utils.using_decoupled_model_transaction_policy(config):
        raise pb_utils.TritonModelException(
            f'the model `{name}` can generate any number of responses per request, enable decoupled transaction '
            'policy in model configuration to serve this model')
    for tensor, cfg in (('IN', pb_utils.get_input_config_by_name(config, 'IN')),
                        ('OUT', pb_utils.get_output_config_by_name(config, 'OUT'))):
        if cfg is None: raise pb_utils.TritonModelException(f"the model `{name}` requires a tensor '{tensor}'")
        dims = [int(d) for d in cfg.get('dims', [])]
        if dims != [1]:
            raise pb_utils.TritonModelException(f"the model `{name}` requires the shape of '{tensor}' to be [1], got {dims}")
        if cfg['data_type'] != 'TYPE_INT32':
            raise pb_utils.TritonModelException(
                f"the model `{name}` requires the data_type of '{tensor}' to be 'TYPE_INT32', got {cfg['data_type']}")


class _Factory:
    "TRITONBACKEND_ResponseFactory: sends straight to the core request."
    def __init__(self, request):
        sender = request.get_response_sender()
        self._core, self._keep = sender._core, sender._keep

    def send(self, response, final):
        self._core.send(None if response is None else to_core_response(response, self._keep), final)


class TritonPythonModel:
    def initialize(self, args):
        _check_config(json.loads(args['model_config']), args.get('model_name', 'square'))
        self._threads = []

    def execute(self, requests):
        for request in requests:
            factory = _Factory(request)
            x = pb_utils.get_input_tensor_by_name(request, 'IN')
            if x is None:
                factory.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("input tensor 'IN' is not found")), True)
                continue
            t = threading.Thread(target=self._respond, args=(factory, int(x.as_numpy().ravel()[0])), daemon=True)
            self._threads.append(t)
            t.start()
        return None

    def _respond(self, factory, n):
        "n responses OUT=[n], then the final flag alone."
        for _ in range(max(n, 0)):
            try: factory.send(pb_utils.InferenceResponse([pb_utils.Tensor('OUT', np.array([n], np.int32))]), False)
            except Exception as err: print(f'failed sending response: {err}', flush=True)
        try: factory.send(None, True)
        except Exception as err: print(f'failed sending final response: {err}', flush=True)

    def finalize(self):
        for t in self._threads: t.join()
