"""Triton's QA test backend `sequence` (server repo src/test/sequence/src/sequence.cc, tag v2.51.0; the QA container's
libtriton_sequence.so) as a Python-based backend: `--backend-directory=tests/qa_backends` serves the QA's
`custom_sequence_int32` models with it. Behaviour as the C++ backend's:

- the config must have the control inputs START and READY, one INT32 input INPUT and one output OUTPUT, vectors;
- one INT32 accumulator per batch slot and instance (max(1, max_batch_size) of them): a request's slot is its place in
  the batch the sequence batcher sends, fillers included;
- READY=1, START=1: the accumulator becomes the sum of INPUT; READY=1, START=0: INPUT's sum is added; READY=0: nothing
  changes and the response has no output. With READY=1 every element of OUTPUT (INPUT's shape) is the accumulator;
- `parameters { key: "execute_delay_ms" }` sleeps that long before each execution;
- a batch larger than max-batch-size, or a request of more than one timestep, is refused with the C++ texts.
Not ported: GPU buffers (a CPU-only server) and the C++ file's logging.
"""
import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _check_config(config):
    "The C++ backend's checks of the model configuration, with its error texts."
    controls = [c['name'] for c in config.get('sequence_batching', {}).get('control_input', [])]
    if sorted(controls) != ['READY', 'START']:
        raise pb_utils.TritonModelException("'START' and 'READY' must be configured as the control inputs")
    inputs, outputs = config.get('input', []), config.get('output', [])
    if len(inputs) != 1 or len(inputs[0].get('dims', [])) != 1:
        raise pb_utils.TritonModelException("model must have one input 'INPUT' with vector shape, any length")
    if inputs[0]['name'] != 'INPUT': raise pb_utils.TritonModelException("model input must be named 'INPUT'")
    if len(outputs) != 1 or len(outputs[0].get('dims', [])) != 1:
        raise pb_utils.TritonModelException("model must have one output 'OUTPUT' with vector shape, any length")
    if outputs[0]['name'] != 'OUTPUT': raise pb_utils.TritonModelException("model output must be named 'OUTPUT'")


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args['model_config'])
        _check_config(config)
        self.batching = config.get('max_batch_size', 0) > 0
        delay = config.get('parameters', {}).get('execute_delay_ms', {}).get('string_value', '0')
        self.delay_s = int(delay) / 1000 if delay.strip().lstrip('-').isdigit() else 0
        self.accumulator = [0] * max(1, config.get('max_batch_size', 0))

    def execute(self, requests):
        if len(requests) > len(self.accumulator):
            raise pb_utils.TritonModelException('unable to execute batch larger than max-batch-size')
        if self.delay_s: time.sleep(self.delay_s)
        return [self._step(slot, r) for slot, r in enumerate(requests)]

    def _step(self, slot, request):
        "One sequence's timestep in batch slot `slot`."
        x = pb_utils.get_input_tensor_by_name(request, 'INPUT').as_numpy()
        if self.batching and x.shape[0] != 1:
            return pb_utils.InferenceResponse(error=pb_utils.TritonError('unable to execute more than one timestep at a time'))
        start = int(pb_utils.get_input_tensor_by_name(request, 'START').as_numpy().ravel()[0])
        ready = int(pb_utils.get_input_tensor_by_name(request, 'READY').as_numpy().ravel()[0])
        if not ready: return pb_utils.InferenceResponse([])
        total = int(x.astype(np.int64).sum())
        value = total if start else self.accumulator[slot] + total
        self.accumulator[slot] = (value + 2**31) % 2**32 - 2**31   # int32 arithmetic, wrapping as C++'s
        return pb_utils.InferenceResponse([pb_utils.Tensor('OUTPUT', np.full(x.shape, self.accumulator[slot], np.int32))])
