"""Sequence conformance model (direct): reports the control tensors it sees for each request, and the batch around
it. CTRL = [START, END, READY, CORRID, IN, requests in the batch, request.flags(), request.correlation_id()];
BATCH_READY = READY of every request of the batch, in order (0 marks the batcher's filler requests)."""
import numpy as np
import triton_python_backend_utils as pb_utils


def value(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy().flatten()[0]


class TritonPythonModel:
    def execute(self, requests):
        ready = [int(value(r, "READY")) for r in requests]
        out = []
        for r in requests:
            ctrl = [int(value(r, "START")), int(value(r, "END")), int(value(r, "READY")), int(value(r, "CORRID")),
                    int(value(r, "IN")), len(requests), r.flags(), int(r.correlation_id())]
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("CTRL", np.array([ctrl], np.int64)),
                                                   pb_utils.Tensor("BATCH_READY", np.array([ready], np.int64))]))
        return out
