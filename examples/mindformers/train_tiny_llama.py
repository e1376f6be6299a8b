"""``run_mindformer.py`` for the tiny LLaMA of ``tiny_llama.yaml``: the YAML builds
everything (MindFormers' ``Trainer``), the data is synthetic tokens.

    python -m mindwatch.mindspore.mindformers examples/mindformers/train_tiny_llama.py \
        --config examples/mindformers/tiny_llama.yaml

Runs on a CPU with MindFormers 1.9 and MindSpore 2.9. Two things make MindFormers'
real train cell work there, neither of them about mindwatch: GRAPH mode set by
``build_context`` before the Trainer, and ``CPUTrainOneStepCell`` below, whose overflow
check uses MindSpore's IsFinite-based one instead of the Ascend-only status registers.
"""

from __future__ import annotations

import argparse
from typing import Any

import mindspore as ms
import numpy as np
from mindformers import MindFormerConfig, Trainer, build_context
from mindformers.tools.register import MindFormerModuleType, MindFormerRegister
from mindformers.wrapper import MFTrainOneStepCell
from mindspore.nn.wrap.loss_scale import _ascend_grad_overflow


@MindFormerRegister.register(MindFormerModuleType.WRAPPER)
class CPUTrainOneStepCell(MFTrainOneStepCell):  # type: ignore[misc]
    """``MFTrainOneStepCell`` with an overflow check that runs on CPU."""

    def get_overflow_status(self, status: Any, compute_output: Any) -> Any:
        return self._get_distributed_overflow_status_on_infnan_mode(
            _ascend_grad_overflow, compute_output
        )


class Tokens:
    """Synthetic token sequences: one ``input_ids`` column of seq_length + 1 tokens."""

    def __init__(self, samples: int, seq_length: int, vocab: int) -> None:
        self.samples, self.seq_length, self.vocab = samples, seq_length, vocab

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, i: int) -> tuple[np.ndarray]:
        rng = np.random.default_rng(i)
        return (rng.integers(0, self.vocab, self.seq_length + 1).astype(np.int32),)


def dataset(config: Any, steps: int = 30) -> Any:
    """``steps`` batches of synthetic tokens shaped for the config's model."""
    model, batch = config.model.model_config, config.runner_config.batch_size
    tokens = Tokens(batch * steps, model.seq_length, model.vocab_size)
    data = ms.dataset.GeneratorDataset(tokens, ["input_ids"], shuffle=False)
    return data.batch(batch, drop_remainder=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="the MindFormers YAML")
    args = parser.parse_args()
    config = MindFormerConfig(args.config)
    build_context(config)
    Trainer(args=config, train_dataset=dataset(config)).train()


if __name__ == "__main__":
    main()
