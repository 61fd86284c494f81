"""Y = X * scale + offset, with scale and offset from the config's `parameters` (and an optional
per-request `offset` parameter added on top)."""
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = config["parameters"]
        self.scale = float(params["scale"]["string_value"])
        self.offset = float(params["offset"]["string_value"])
        self.note = params["note"]["string_value"].encode("utf-8")
        self.y_dtype = pb_utils.triton_string_to_numpy(pb_utils.get_output_config_by_name(config, "Y")["data_type"])

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            extra = float(json.loads(request.parameters()).get("offset", 0))
            y = (x * self.scale + self.offset + extra).astype(self.y_dtype)
            note = np.array([[self.note]] * x.shape[0], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", y), pb_utils.Tensor("NOTE", note)]))
        return responses
