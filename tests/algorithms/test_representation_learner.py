"""The representation role of an ``Agent``: ``RepresentationLearner`` and
``LatentDynamicsLearner`` (alf/algorithms/representation_learner.py,
latent_dynamics_learner.py)."""
import os

import pytest
import torch

from alf.algorithms.agent import Agent
from alf.algorithms.algorithm import Algorithm
from alf.algorithms.latent_dynamics_learner import LatentDynamicsLearner
from alf.algorithms.sac_algorithm import SacAlgorithm
from alf.data_structures import LossInfo
from alf.errors import ConfigError
from alf.tensor_specs import BoundedTensorSpec, TensorSpec
from alf.utils.optimizers import Adam

OBS = TensorSpec((4,))
DISCRETE = BoundedTensorSpec((), torch.int64, 0, 2)

LATENT = """
TrainerConfig.algorithm_ctor = @Agent
Agent.rl_algorithm_cls = @{rl}
Agent.representation_learner_cls = @LatentDynamicsLearner
Agent.encoder_trained_by_rl = {shared}
LatentDynamicsLearner.fc_layer_params = (16,)
LatentDynamicsLearner.feature_size = 8
LatentDynamicsLearner.dynamics_fc_layer_params = (16,)
LatentDynamicsLearner.optimizer = @repr/alf.optimizers.Adam()
repr/alf.optimizers.Adam.lr = 1e-3
"""


def _latent(**kwargs):
    return LatentDynamicsLearner(OBS, DISCRETE, fc_layer_params=(32,), feature_size=16,
                                 dynamics_fc_layer_params=(32,),
                                 optimizer=Adam(lr=3e-3), **kwargs)


def _transitions(n=256):
    """A deterministic system: the action shifts a 4-vector; a learnable next latent."""
    obs = torch.randn(n, 4)
    action = torch.randint(0, 3, (n,))
    shift = torch.tensor([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, -1.0, 0]])
    return obs, action, 0.9 * obs + shift[action]


def test_latent_dynamics_loss_falls_and_the_latent_does_not_collapse():
    torch.manual_seed(0)
    learner = _latent()
    prev_obs, action, obs = _transitions()
    valid = torch.ones(prev_obs.shape[0], dtype=torch.bool)
    before = learner.loss(prev_obs, action, obs).mean().item()
    for _ in range(400):
        info = learner.update(prev_obs, action, obs, valid)
    after = learner.loss(prev_obs, action, obs).mean().item()
    assert after < 0.2 * before, (before, after)
    z = learner.encode(torch.randn(512, 4))
    assert z.shape == (512, 16) and learner.output_spec == TensorSpec((16,))
    # not a constant: the features still tell observations apart
    assert z.std(0).mean().item() > 0.05
    assert isinstance(info, LossInfo) and info.loss.ndim == 0
    # the target encoder trails the encoder (EMA), no optimizer moves it directly
    enc = dict(learner.encoder.named_parameters())
    for name, p in learner._target_encoder.named_parameters():
        assert not p.requires_grad
        assert not torch.equal(p, enc[name])


def test_keep_existing_grads_sums_gradients_into_one_step():
    """The shared encoder's step: the RL loss's gradient already on the parameter plus
    the representation loss's, one optimizer step (SGD lr 1: p - (g_rl + g_own))."""
    class One(Algorithm):
        def __init__(self):
            super().__init__(optimizer=alf_sgd(), name="One")
            self.w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))

    def alf_sgd():
        from alf.utils.optimizers import OptimizerFactory
        return OptimizerFactory(torch.optim.SGD, lr=1.0)

    alg = One()
    alg.w.grad = torch.tensor([10.0, 20.0])
    alg.update_with_gradient(LossInfo(loss=(alg.w * torch.tensor([1.0, 3.0])).sum()),
                             count_update=False, keep_existing_grads=True)
    assert torch.equal(alg.w.detach(), torch.tensor([1.0 - 11.0, 2.0 - 23.0]))
    alg.w.grad = torch.tensor([10.0, 20.0])
    alg.update_with_gradient(LossInfo(loss=alg.w.sum()), count_update=False)
    assert torch.equal(alg.w.detach(), torch.tensor([-10.0 - 1.0, -21.0 - 1.0]))


def _agent_and_batch(shared):
    torch.manual_seed(0)
    pend_obs = TensorSpec((3,))
    action = BoundedTensorSpec((1,), torch.float32, -2.0, 2.0)

    def representation(observation_spec, action_spec, context):
        return LatentDynamicsLearner(observation_spec, action_spec, fc_layer_params=(16,),
                                     feature_size=8, optimizer=Adam(lr=1e-3),
                                     context=context)

    def sac(**kwargs):
        from alf.algorithms.sac_algorithm import SacAlgorithm
        return SacAlgorithm(optimizer=Adam(lr=1e-3), **kwargs)

    return Agent(pend_obs, action, rl_algorithm_cls=sac,
                 representation_learner_cls=representation,
                 encoder_trained_by_rl=shared)


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "separate"])
def test_the_rl_gradient_reaches_the_encoder_only_when_shared(make_trainer, alf_cli, tmp_path,
                                                               shared):
    """SAC (n-step transitions from sampled replay) on the encoded observation: the
    encoder's gradient when the representation learner's step begins is the SAC loss's
    (shared) or nothing (separate); both parts train."""
    trainer = make_trainer(tmp_path / "run", alf_cli.TINY_SAC + LATENT.format(
        rl="SacAlgorithm", shared=shared) + "TrainerConfig.mini_batch_length = 2\n")
    agent = trainer.algorithm
    representation = agent.representation_learner
    seen, left = [], []  # the encoder's gradients as each step begins / ends

    def grads():
        return [None if p.grad is None else p.grad.clone()
                for p in representation.encoder.parameters()]

    own_update = representation.update_with_gradient

    def spy(loss_info, **kwargs):
        seen.append(grads())
        assert kwargs["keep_existing_grads"] is shared
        out = own_update(loss_info, **kwargs)
        left.append(grads())
        return out

    representation.update_with_gradient = spy
    trainer.run()
    assert isinstance(agent.rl_algorithm, SacAlgorithm)
    assert agent.rl_algorithm.observation_spec == TensorSpec((8,))
    assert len(seen) > 1 and trainer.context.num_updates == len(seen)
    for step, at_start in enumerate(seen):
        if shared:  # the SAC loss's gradient, this batch's only
            assert all(g is not None and g.abs().sum() > 0 for g in at_start)
            if step:
                assert not any(torch.equal(g, h) for g, h in zip(at_start, left[step - 1]))
        else:  # untouched since the learner's own previous step
            before = left[step - 1] if step else [None] * len(at_start)
            assert all((g is None and h is None) or torch.equal(g, h)
                       for g, h in zip(at_start, before))
    state = agent.state_dict()
    rollout = agent.rollout_state_dict()
    encoder = [k for k in state if k.startswith("_representation.encoder.")]
    assert encoder and all(k in rollout for k in encoder)  # actors encode
    assert not any(k.startswith(("_representation._dynamics", "_representation._target"))
                   for k in rollout)


def test_ppo_with_the_latent_example_trains_and_resumes(make_trainer, tmp_path):
    """The example by gin alone (whole-buffer PPO: preprocessing on features drops the
    bootstrap step, the raw observations follow); a resume continues from it."""
    params = ["TrainerConfig.num_iterations=3", "TrainerConfig.evaluate=False",
              "create_environment.num_parallel_environments=2",
              "TrainerConfig.unroll_length=8", "TrainerConfig.mini_batch_size=8",
              "TrainerConfig.num_updates_per_train_iter=2",
              "TrainerConfig.checkpoint_interval=3"]
    trainer = make_trainer(tmp_path / "run", "include 'ppo_latent_cart_pole.gin'\n", params)
    trainer.run()
    agent = trainer.algorithm
    assert agent.rl_algorithm.observation_spec == TensorSpec((64,))
    opt = agent.representation_learner.optimizers()[0]
    steps = [float(s["step"]) for s in opt.state_dict()["state"].values()]
    # one representation step per PPO step: 3 iterations x 2 updates
    assert steps and min(steps) == 6 == trainer.context.num_updates
    saved = torch.load(os.path.join(str(tmp_path / "run"), "train", "ckpt-0000000003.pt"),
                       weights_only=False)["algorithm"]
    target = [k for k in saved if k.startswith("_representation._target_encoder.")]
    assert target and all(torch.equal(saved[k], agent.state_dict()[k]) for k in target)
    resumed = make_trainer(tmp_path / "run", "include 'ppo_latent_cart_pole.gin'\n",
                           params[:-1] + ["TrainerConfig.num_iterations=4"])
    resumed.run()  # restores iteration 3 (optimizer state included), trains one more
    opt = resumed.algorithm.representation_learner.optimizers()[0]
    steps = [float(s["step"]) for s in opt.state_dict()["state"].values()]
    assert min(steps) == 8 == resumed.context.num_updates


def test_bad_representation_setups_are_one_error_each(make_trainer, alf_cli, tmp_path,
                                                      clean_gin):
    with pytest.raises(ConfigError, match="set LatentDynamicsLearner.optimizer"):
        Agent(OBS, DISCRETE, representation_learner_cls=LatentDynamicsLearner)
    with pytest.raises(ConfigError, match="target_tau = 0 is out of range"):
        LatentDynamicsLearner(OBS, DISCRETE, target_tau=0, optimizer=Adam(lr=1e-3))
    with pytest.raises(ConfigError, match="is not a RepresentationLearner"):
        Agent(OBS, DISCRETE, representation_learner_cls=lambda **kw: torch.nn.Linear(1, 1))
    # refused when the experiment is built (Agent.check_training_config), before anything
    # is written (issue 39 item 5: it was found in the first iteration)
    with pytest.raises(ConfigError, match="set TrainerConfig.mini_batch_length to 2 or more"):
        make_trainer(tmp_path / "run", alf_cli.TINY_PPO + LATENT.format(
            rl="PPOAlgorithm", shared=True) + "TrainerConfig.mini_batch_length = 1\n")
    assert not os.path.exists(tmp_path / "run")


def test_appo_with_rnd_and_a_latent_is_bit_identical_in_deterministic_async(make_trainer,
                                                                           tmp_path):
    """Asynchronous env workers act on the encoder's features (the encoder travels to
    them with the policy); two deterministic-async runs end with the same tensors."""
    params = ["Agent.representation_learner_cls=@LatentDynamicsLearner",
              "LatentDynamicsLearner.optimizer=@repr/alf.optimizers.Adam()",
              "LatentDynamicsLearner.feature_size=16",
              "TrainerConfig.mini_batch_length=2", "TrainerConfig.num_iterations=3",
              "TrainerConfig.evaluate=False", "TrainerConfig.async_mode='deterministic'",
              "TrainerConfig.checkpoint_interval=3"]
    finals = []
    for run in ("a", "b"):
        trainer = make_trainer(tmp_path / run, "include 'appo_rnd_cart_pole.gin'\n", params)
        trainer.run()
        assert trainer.context.num_updates > 0
        finals.append(torch.load(os.path.join(str(tmp_path / run), "train",
                                              "ckpt-0000000003.pt"),
                                 weights_only=False)["algorithm"])
    a, b = finals
    encoder = [k for k in a if k.startswith("_representation.encoder.")]
    assert encoder and a.keys() == b.keys()
    for key, value in a.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, b[key]), key


def test_a2c_trains_through_a_shared_encoder(make_trainer, alf_cli, tmp_path):
    """On-policy through the rollout's graph: A2C's loss reaches the encoder it acted
    through (shared), and the learner steps it with its own loss on the unroll."""
    trainer = make_trainer(tmp_path / "run", alf_cli.TINY_A2C + LATENT.format(
        rl="ActorCriticAlgorithm", shared=True))
    agent = trainer.algorithm
    representation = agent.representation_learner
    seen = []
    own_update = representation.update_with_gradient

    def spy(loss_info, **kwargs):
        seen.append([p.grad is not None and p.grad.abs().sum().item() > 0
                     for p in representation.encoder.parameters()])
        return own_update(loss_info, **kwargs)

    representation.update_with_gradient = spy
    before = [p.detach().clone() for p in representation.encoder.parameters()]
    trainer.run()
    assert agent.rl_algorithm.observation_spec == TensorSpec((8,))
    assert seen and len(seen) == trainer.context.num_updates
    assert all(all(step) for step in seen)  # A2C's gradient is on the encoder first
    assert all(not torch.equal(a, b) for a, b in zip(before, representation.encoder.parameters()))
