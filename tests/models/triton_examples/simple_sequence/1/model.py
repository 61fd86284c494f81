"""Stand-in for Triton's example `simple_sequence` (sequence batcher, direct): OUTPUT = INPUT + START, for each
request of a sequence (START is 1 on its first request). What the example sequence clients check."""
import numpy as np
import triton_python_backend_utils as pb_utils


def value(request, name):
    return pb_utils.get_input_tensor_by_name(request, name).as_numpy()


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", (value(r, "INPUT") + value(r, "START")).astype(np.int32))])
                for r in requests]
