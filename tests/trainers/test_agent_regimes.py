"""An ``Agent`` (reward modules, a representation learner) in the regimes that are not
the examples' own: pure offline (IQL), hybrid offline + online (SAC) and the learner
thread. Each part trains with its own optimizer."""
import pytest
import torch

from test_offline_training import _hybrid_trainer, make_random_dataset

RND = [
    "TrainerConfig.algorithm_ctor=@Agent", "Agent.reward_modules=[@RNDRewardModule]",
    "Agent.reward_weights=[1.0, 0.1]", "RNDRewardModule.fc_layer_params=(8,)",
    "RNDRewardModule.feature_size=4", "RNDRewardModule.optimizer=@rnd/alf.optimizers.Adam()",
]
LATENT = [
    "TrainerConfig.algorithm_ctor=@Agent",
    "Agent.representation_learner_cls=@LatentDynamicsLearner",
    "LatentDynamicsLearner.fc_layer_params=(8,)", "LatentDynamicsLearner.feature_size=8",
    "LatentDynamicsLearner.optimizer=@repr/alf.optimizers.Adam()",
]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return make_random_dataset(tmp_path_factory.mktemp("ds") / "pendulum")


def _steps(algorithm) -> float:
    """The fewest optimizer steps of any parameter ``algorithm``'s optimizer holds."""
    state = algorithm.optimizers()[0].state_dict()["state"].values()
    return min(float(s["step"]) for s in state)


def test_pure_offline_iql_on_a_learned_latent(dataset, tmp_path):
    """IQL from a dataset alone, acting and training on the encoder's features."""
    trainer = _hybrid_trainer(
        tmp_path, dataset,
        LATENT + ["Agent.rl_algorithm_cls=@IqlAlgorithm"],
        unroll_length=0, num_env_steps=0, num_iterations=3, num_updates_per_train_iter=2,
        mini_batch_size=16, initial_collect_steps=0)
    try:
        trainer.run()
        agent = trainer.algorithm
        assert trainer.context.env_steps == 0 and trainer.context.num_updates == 6
        assert _steps(agent.representation_learner) == 6
    finally:
        trainer.close()


def test_hybrid_sac_with_rnd(dataset, tmp_path):
    """Offline rows and online rows in one batch: the bonus is computed for both."""
    trainer = _hybrid_trainer(tmp_path, dataset, RND + ["Agent.rl_algorithm_cls=@SacAlgorithm"],
                              num_env_steps=120, initial_collect_steps=40,
                              mini_batch_size=16, offline_fraction=0.5)
    try:
        trainer.run()
        agent = trainer.algorithm
        assert trainer.context.num_updates > 0
        assert _steps(agent.reward_modules[0]) == trainer.context.num_updates
    finally:
        trainer.close()


def test_learner_thread_trains_every_part(make_trainer, tmp_path):
    trainer = make_trainer(tmp_path / "run", "include 'sac_rnd_pendulum.gin'\n",
                           ["TrainerConfig.learner_thread=True",
                            "TrainerConfig.num_env_steps=400",
                            "TrainerConfig.initial_collect_steps=200",
                            "TrainerConfig.mini_batch_size=16", "TrainerConfig.evaluate=False"])
    trainer.run()
    agent = trainer.algorithm
    assert trainer.context.num_updates > 0
    assert _steps(agent.reward_modules[0]) == trainer.context.num_updates
