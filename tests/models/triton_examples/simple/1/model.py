"""Stand-in for Triton's example `simple`: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (INT32 [16]).
Its config names only the backend and batch size: like Triton's ONNX backend reading the model file, auto_complete_config
fills in the tensors, so a load request that overrides the config (simple_*_model_control.py) still gets them."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        have = {t["name"] for t in config.as_dict()["input"] + config.as_dict()["output"]}
        for name in ("INPUT0", "INPUT1"):
            if name not in have: config.add_input({"name": name, "data_type": "TYPE_INT32", "dims": [16]})
        for name in ("OUTPUT0", "OUTPUT1"):
            if name not in have: config.add_output({"name": name, "data_type": "TYPE_INT32", "dims": [16]})
        return config

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", (a + b).astype(np.int32)),
                                                         pb_utils.Tensor("OUTPUT1", (a - b).astype(np.int32))]))
        return responses
