"""One pipeline per process: logged records -> derived values -> sinks and rules, off
the training thread; the rules' decisions come back as values (controls)."""

from mindwatch.pipeline.alerting import Alerting
from mindwatch.pipeline.outputs import Outputs, open_outputs
from mindwatch.pipeline.pipeline import BOTH, MAIN, RANK, Pipeline

__all__ = ["BOTH", "MAIN", "RANK", "Alerting", "Outputs", "Pipeline", "open_outputs"]
