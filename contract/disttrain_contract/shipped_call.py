"""What `Client.train` and `disttrain.local.train` hand the trainer's runner: a folder (the mount of the job's
ConfigMap, or a folder here) holding the function's source and how to call it, read by `RUN_FUNCTION_COMMAND
FOLDER` in every replica."""

from __future__ import annotations

RUN_FUNCTION_COMMAND = "disttrain-run-function"
FUNCTION_FILE = "function.py"  # the function's source, dedented
CALL_FILE = "call.json"  # {name, arguments, takesStrategy, takesProgress, packages, indexUrl}
PACKAGES_DIR_ENV = "DISTTRAIN_PACKAGES_DIR"  # a writable folder for the packages; a new temporary one if unset
