"""Sequence conformance model (implicit state): SUM = SUM_IN + IN, returned to the client as SUM and to Triton as
the new state SUM_OUT; SEEN = [the state it was given, START]."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            state = pb_utils.get_input_tensor_by_name(r, "SUM_IN").as_numpy()
            total = (state + pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()).astype(np.int32)
            start = pb_utils.get_input_tensor_by_name(r, "START").as_numpy()
            seen = np.concatenate([state.reshape(1, 1), start.reshape(1, 1)], axis=1).astype(np.int32)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("SUM", total), pb_utils.Tensor("SUM_OUT", total),
                                                   pb_utils.Tensor("SEEN", seen)]))
        return out
