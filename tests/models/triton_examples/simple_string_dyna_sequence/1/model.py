"""Stand-in for the QA's `simple_string_dyna_sequence` (the dyna_sequence backend with a string correlation id):
OUTPUT is the running sum of INPUT over the sequence (restarted by START), plus int(correlation id) on its last
request (END). What the example sequence clients check. The sums live here, keyed by correlation id.

The QA model reads the id from a CORRID control tensor of TYPE_STRING; Triton 2.51 pads string CORRID tensors to 128
bytes, which its Python backend cannot read ("unexpected number of string elements 2 for inference input 'CORRID'",
triton-inference-server/core#339), so this stand-in asks the request instead: `request.correlation_id()`."""
import numpy as np
import triton_python_backend_utils as pb_utils


def value(request, name):
    return int(pb_utils.get_input_tensor_by_name(request, name).as_numpy().flatten()[0])


class TritonPythonModel:
    def initialize(self, args):
        self.sums = {}

    def execute(self, requests):
        responses = []
        for r in requests:
            corrid = str(r.correlation_id())
            start, end = value(r, "START"), value(r, "END")
            total = (0 if start else self.sums.get(corrid, 0)) + value(r, "INPUT")
            self.sums[corrid] = total
            if end: del self.sums[corrid]
            out = np.array([[total + (int(corrid) if end else 0)]], np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT", out)]))
        return responses
