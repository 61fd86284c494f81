"""Reports its own life: the `args` given to initialize (also as an output), and initialize/finalize
events appended as JSON lines to the file named by $LIFECYCLE_LOG, when set."""
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils


def record(event, **fields):
    path = os.environ.get("LIFECYCLE_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(dict(event=event, **fields)) + "\n")


class TritonPythonModel:
    def initialize(self, args):
        self.args = args
        record("initialize", args=args, model_dir=pb_utils.get_model_dir())

    def execute(self, requests):
        responses = []
        for request in requests:
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("ARGS", np.array([json.dumps(self.args, sort_keys=True).encode()], dtype=np.object_)),
                pb_utils.Tensor("MODEL_DIR", np.array([pb_utils.get_model_dir().encode()], dtype=np.object_)),
            ]))
        return responses

    def finalize(self):
        record("finalize", instance=self.args["model_instance_name"])
