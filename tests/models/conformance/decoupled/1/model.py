import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Sends N responses ("<text> #i", i) per request, then the final flag.

    N < 0 answers with one error; request parameter fail_at=i turns response i into an error;
    raise_at=i raises after i responses.
    """

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            text = pb_utils.get_input_tensor_by_name(request, "text_input").as_numpy()[0]
            n_tensor = pb_utils.get_input_tensor_by_name(request, "N")
            n = int(n_tensor.as_numpy()[0]) if n_tensor is not None else 3
            params = json.loads(request.parameters())
            if n < 0:
                sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("negative N")),
                            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                continue
            for i in range(n):
                if params.get("raise_at") == i:
                    raise ValueError("raised at %d" % i)
                if params.get("fail_at") == i:
                    sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("failed at %d" % i)))
                    continue
                sender.send(pb_utils.InferenceResponse([
                    pb_utils.Tensor("text_output", np.array([text + b" #%d" % i], dtype=np.object_)),
                    pb_utils.Tensor("IDX", np.array([i], dtype=np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
