"""Sequence conformance model (string ids, no CORRID control, core#339): a running sum kept here, keyed by
request.correlation_id(); ID echoes that id and the flags as 'id/flags'."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        out = []
        for r in requests:
            cid = r.correlation_id()
            start = int(pb_utils.get_input_tensor_by_name(r, "START").as_numpy().flatten()[0])
            total = (0 if start else self.sums.get(cid, 0)) + int(pb_utils.get_input_tensor_by_name(r, "IN").as_numpy().flatten()[0])
            self.sums[cid] = total
            ident = np.array([[f"{cid!r}/{r.flags()}".encode()]], dtype=object)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", np.array([[total]], np.int32)),
                                                   pb_utils.Tensor("ID", ident)]))
        return out
