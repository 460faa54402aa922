"""File I/O in one place: atomic writes (:mod:`~nslm.files.atomic`), the JSON policy and the
JSON reader (:mod:`~nslm.files.json_policy`), and safetensors written and read back
(:mod:`~nslm.files.tensors`), the one binary format nslm reads. Nothing is unpickled."""
