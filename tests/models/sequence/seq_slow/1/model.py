"""seq_controls (direct, four slots, one instance) that takes 1 s over a batch holding an IN >= 1000: while it runs,
the next requests queue, so a test can send requests that arrive while a sequence's END waits in its slot.
CTRL and BATCH_READY as seq_controls'."""
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def value(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy().flatten()[0]


class TritonPythonModel:
    def execute(self, requests):
        if any(int(value(r, "IN")) >= 1000 for r in requests): time.sleep(1.0)
        ready = [int(value(r, "READY")) for r in requests]
        out = []
        for r in requests:
            ctrl = [int(value(r, "START")), int(value(r, "END")), int(value(r, "READY")), int(value(r, "CORRID")),
                    int(value(r, "IN")), len(requests), r.flags(), int(r.correlation_id())]
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("CTRL", np.array([ctrl], np.int64)),
                                                   pb_utils.Tensor("BATCH_READY", np.array([ready], np.int64))]))
        return out
