"""Issue 30's bar: a new reward module is at most 60 lines of Python, and it trains in an
Agent configured by gin alone. This one is a learned count-style novelty bonus."""
import inspect

import torch

import alf
from alf.algorithms.reward_module import RewardModule


@alf.configurable
class LearnedNovelty(RewardModule):
    """Bonus ``1 / (1 + d(s))`` where ``d`` is a density score trained up on visited
    observations: frequent states get a small bonus."""
    uses_previous_step = False

    def __init__(self, observation_spec, action_spec, optimizer=None, context=None,
                 name="LearnedNovelty"):
        super().__init__(observation_spec, action_spec, optimizer=optimizer,
                         context=context, name=name)
        size = observation_spec.shape[0]
        self._density = torch.nn.Sequential(torch.nn.Linear(size, 16), torch.nn.ReLU(),
                                            torch.nn.Linear(16, 1), torch.nn.Softplus())

    def reward(self, prev_observation, prev_action, observation):
        with torch.no_grad():
            return 1.0 / (1.0 + self._density(observation).squeeze(-1))

    def loss(self, prev_observation, prev_action, observation):
        # raise the density of what was visited (bounded by the softplus' slope)
        return -self._density(observation).squeeze(-1).clamp(max=10.0)


def test_a_new_reward_module_is_short_and_trains_by_gin(make_trainer, alf_cli, tmp_path):
    lines, _ = inspect.getsourcelines(LearnedNovelty)
    assert len(lines) <= 60, len(lines)
    conf = alf_cli.TINY_PPO + """
TrainerConfig.algorithm_ctor = @Agent
Agent.reward_modules = [@LearnedNovelty]
Agent.reward_weights = [1.0, 0.1]
LearnedNovelty.optimizer = @novelty/alf.optimizers.Adam()
novelty/alf.optimizers.Adam.lr = 1e-2
"""
    trainer = make_trainer(tmp_path / "run", conf)
    agent = trainer.algorithm
    module = agent.reward_modules[0]
    probe = torch.zeros(8, 4)
    before = module.reward(None, None, probe).mean().item()
    trainer.run()
    steps = [float(s["step"]) for s in module.optimizers()[0].state_dict()["state"].values()]
    assert steps and min(steps) == trainer.context.num_updates > 0
    assert module.reward(None, None, probe).mean().item() < before  # CartPole starts near 0
    assert any(k.startswith("_reward_modules.0._density") for k in agent.state_dict())
    trainer.close()
