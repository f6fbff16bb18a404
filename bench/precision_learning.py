"""Learning with bf16 against fp32 (``TrainerConfig.train_precision`` / ``act_precision``):
the same example, seeds and budget in both arms, compared with ``alf.bin.compare`` (IQM,
95% bootstrap CIs, P(A > B)). Issue 31's item 5: mixed precision must keep learning.

    python bench/precision_learning.py --task breakout_ppo --parallel 2
    python bench/precision_learning.py --task breakout_appo --parallel 2
    python bench/precision_learning.py --task halfcheetah_sac --parallel 2

Tasks (:data:`TASKS`; the runner is ``bench/seed_compare.py``):

- ``breakout_ppo``: ``ppo_atari.gin`` (sync PPO, Breakout), seeds 0-2, 150k agent steps
  (600k frames; the learning rate and clip range anneal over the budget); the bf16 arm
  trains and acts in bf16. Compared on the training return (Atari runs do not evaluate).
- ``breakout_appo``: the same with ``appo_atari.gin`` (async APPO).
- ``halfcheetah_sac``: ``sac_halfcheetah.gin``, seeds 0-2, 100k env steps, greedy
  evaluation return every 10k steps.

Every run has one torch thread (``TrainerConfig.num_threads=1``), so two runs side by side
do not oversubscribe the cores (bf16's oneDNN kernels spin-wait: docs/design/mixed_precision.md).

What a 2-core machine allows: ``breakout_ppo`` is six runs of ~7-10 minutes two at once;
the issue's equal-agent-steps comparison at full length (10M agent steps) is ~5 hours a
run here.
"""
import os
import sys
from typing import Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import seed_compare  # noqa: E402

#: both bf16 arms compute in bf16 for training and acting
BF16: List[str] = ['TrainerConfig.train_precision="bf16"', 'TrainerConfig.act_precision="bf16"']


def _breakout(conf: str) -> Dict:
    """A Breakout task: ``conf`` in both arms, 150k agent steps, seeds 0-2, training return.
    One torch thread per run: two bf16 runs side by side with 2 threads each spin in
    oneDNN's kernels (docs/design/mixed_precision.md); both arms alike."""
    return {"arms": {"fp32": conf, "bf16": conf}, "arm_params": {"bf16": BF16},
            "env_steps": 150_000,
            "params": ["TrainerConfig.summary_interval=5", "TrainerConfig.num_threads=1"],
            "metrics": ["train_return"],
            "target": 10.0,  # bricks per life lost ~ 2: past the random policy's ~1.5
            "seeds": [0, 1, 2]}


TASKS: Dict[str, Dict] = {
    "breakout_ppo": _breakout("ppo_atari.gin"),
    "breakout_appo": _breakout("appo_atari.gin"),
    "halfcheetah_sac": {
        "arms": {"fp32": "sac_halfcheetah.gin", "bf16": "sac_halfcheetah.gin"},
        "arm_params": {"bf16": BF16},
        "env_steps": 100_000,
        "params": ["TrainerConfig.num_threads=1"],
        "target": 3000.0,
        "seeds": [0, 1, 2],
    },
}


def main(argv=None) -> int:
    return seed_compare.main("precision_learning", TASKS, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
