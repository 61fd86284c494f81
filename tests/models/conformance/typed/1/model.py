import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Identity for every datatype: each input given comes back as <NAME>_OUT."""

    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = [pb_utils.Tensor(t.name() + "_OUT", t.as_numpy()) for t in request.inputs()]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
