"""Stand-in for Triton's example `simple_dyna_sequence` (sequence batcher, oldest, CORRID UINT64):
OUTPUT = INPUT + START, plus the correlation id on the sequence's last request (END). What the clients check."""
import numpy as np
import triton_python_backend_utils as pb_utils


def value(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy()


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for r in requests:
            out = value(r, "INPUT").astype(np.int64) + value(r, "START") + value(r, "END") * value(r, "CORRID").astype(np.int64)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", out.astype(np.int32))]))
        return responses
