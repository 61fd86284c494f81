"""Triton's test backend `square` (triton-inference-server/square_backend, src/square.cc; the QA container's
libtriton_square.so, which serves src/test/models/square_int32 in qa/L0_decoupled and the models qa/L0_response_statistics
makes) as a Python-based backend: `--backend-directory=tests/qa_backends` serves models whose config says
`backend: "square"` with it. Its semantics, ported (no code copied):

- the model must be decoupled, IN must be INT32 with dims [1] and OUT INT32 with dims [1] (the checks and texts of
  python_backend's examples/decoupled/square_model.py, r24.10, its Python twin);
- the config's parameters CUSTOM_INFER_DELAY_NS, CUSTOM_OUTPUT_DELAY_NS, CUSTOM_CANCEL_DELAY_NS, CUSTOM_FAIL_COUNT and
  CUSTOM_EMPTY_COUNT (string_value, digits only; anything else is logged and left at 0: square.cc's ModelParameters);
- per request a detached thread makes n responses, n the element of IN (n <= 0: none). For each: the time it starts;
  if the request is cancelled (TRITONBACKEND_ResponseFactoryIsCancelled) it sleeps the cancel delay, otherwise the
  infer delay; response e of n is a success while e + FAIL + EMPTY < n, then a failure while e + EMPTY < n, then empty.
  Unless cancelled or empty, it marks the output start, makes the response OUT=[n] and sleeps the output delay. It
  sends the response (flags 0) with the error "simulated failure" (UNKNOWN) for a failure; a cancelled or empty one
  sends nothing. Every response is reported to the response statistics (TRITONBACKEND_ModelInstanceReportResponse-
  Statistics: triton_mini.scheduler.report_response_statistics) with its start, output start (0: none), end and error
  (CANCELLED "cancelled" when cancelled); a cancelled request stops after that report. Then the final flag alone
  (TRITONBACKEND_ResponseFactorySendFlags);
- its INFO log lines: "add delay N ns", "sent response i of n", "cancelled at response i of n";
- finalize waits for the response threads.
Responses go through the request's response factory as the repeat port's (tests/qa_backends/repeat): to the core
request, as TRITONBACKEND_ResponseSend does.
"""
import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils
from triton_mini.errors import TritonError
from triton_mini.pb_utils import to_core_response   # what TRITONBACKEND_ResponseSend hands the core (docstring)
from triton_mini.scheduler import report_response_statistics


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


PARAMETERS = ('CUSTOM_INFER_DELAY_NS', 'CUSTOM_OUTPUT_DELAY_NS', 'CUSTOM_CANCEL_DELAY_NS', 'CUSTOM_FAIL_COUNT', 'CUSTOM_EMPTY_COUNT')


def _parameters(config) -> dict:
    "square.cc's ModelParameters: each of PARAMETERS from its string_value when that is all digits, else 0."
    values = dict.fromkeys(PARAMETERS, 0)
    for key in PARAMETERS:
        if key not in config.get('parameters', {}): continue
        value = config['parameters'][key].get('string_value')
        if value is None: pb_utils.Logger.log_info(f'string_value cannot be parsed from {key} parameter')
        elif not value.isdigit() or not value.isascii(): pb_utils.Logger.log_info(f'{value} string_value from {key} parameter is not a number')
        else: values[key] = int(value)
    return values


class _Factory:
    "TRITONBACKEND_ResponseFactory: sends straight to the core request."
    def __init__(self, request):
        sender = request.get_response_sender()
        self._core, self._keep = sender._core, sender._keep

    def send(self, response, final):
        self._core.send(None if response is None else to_core_response(response, self._keep), final)

    def is_cancelled(self) -> bool: return self._core.cancelled


def _sleep(ns):
    if ns > 0:
        pb_utils.Logger.log_info(f'add delay {ns} ns')
        time.sleep(ns / 1e9)


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args['model_config'])
        _check_config(config, args.get('model_name', 'square'))
        self._p = _parameters(config)
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

    def _result(self, e, n):
        "square.cc's InferResult: SUCCESS on [0, n-E-F), FAIL on [n-E-F, n-E), EMPTY on [n-E, n)."
        fail, empty = self._p['CUSTOM_FAIL_COUNT'], self._p['CUSTOM_EMPTY_COUNT']
        return 'success' if e + fail + empty < n else 'fail' if e + empty < n else 'empty'

    def _respond(self, factory, n):
        "The response thread (docstring)."
        p = self._p
        for e in range(max(n, 0)):
            start = time.monotonic_ns()
            cancelled = factory.is_cancelled()
            _sleep(p['CUSTOM_CANCEL_DELAY_NS'] if cancelled else p['CUSTOM_INFER_DELAY_NS'])
            result = self._result(e, n)
            output_start, response = 0, None
            if not cancelled and result != 'empty':
                output_start = time.monotonic_ns()
                response = pb_utils.Tensor('OUT', np.array([n], np.int32))
                _sleep(p['CUSTOM_OUTPUT_DELAY_NS'])
            end = time.monotonic_ns()
            error = (TritonError('cancelled', 'CANCELLED') if cancelled else
                     TritonError('simulated failure', 'UNKNOWN') if result == 'fail' else None)
            if response is not None:
                out = (pb_utils.InferenceResponse(error=pb_utils.TritonError(error.message, pb_utils.TritonError.UNKNOWN))
                       if error is not None else pb_utils.InferenceResponse([response]))
                try: factory.send(out, False)
                except Exception as err: pb_utils.Logger.log_error(f'failed sending response: {err}')
            try: report_response_statistics(factory._core, start, output_start, end, error)
            except Exception as err: pb_utils.Logger.log_error(f'failed reporting response statistics: {err}')
            pb_utils.Logger.log_info(f'sent response {e + 1} of {n}')
            if cancelled:
                pb_utils.Logger.log_info(f'cancelled at response {e + 1} of {n}')
                break
        if n == 0: pb_utils.Logger.log_info('IN size is zero, no responses send ')
        try: factory.send(None, True)
        except Exception as err: pb_utils.Logger.log_error(f'failed sending final response: {err}')

    def finalize(self):
        for t in self._threads: t.join()
