"""Sandboxed execution of NESTFUL call sequences (:mod:`.sandbox`, :mod:`.child`) and the functions folder
they run (:mod:`.functions`)."""
from .functions import archive_url, check_functions_dir, executable_functions, one_folder
from .sandbox import (REASONS, SandboxError, SandboxLimits, SequenceJob, SequenceResult, run_sequences)

__all__ = ["archive_url", "check_functions_dir", "executable_functions", "one_folder", "REASONS", "SandboxError",
           "SandboxLimits", "SequenceJob", "SequenceResult", "run_sequences"]
