"""No config.pbtxt: the model describes itself in auto_complete_config."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        inputs = [{"name": "IN", "data_type": "TYPE_FP32", "dims": [2]}]
        outputs = [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [2]}]
        config = auto_complete_model_config.as_dict()
        existing_inputs = {i["name"] for i in config["input"]}
        existing_outputs = {o["name"] for o in config["output"]}
        for i in inputs:
            if i["name"] not in existing_inputs:
                auto_complete_model_config.add_input(i)
        for o in outputs:
            if o["name"] not in existing_outputs:
                auto_complete_model_config.add_output(o)
        auto_complete_model_config.set_max_batch_size(4)
        auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x * 2)]))
        return responses
