"""Pretrained parts (issue 30, item 4): ``@pretrained`` loads a named part of another run
into a network or algorithm at construction, optionally frozen; bad paths, prefixes,
shapes and files are one ConfigError line."""
import os

import gin
import pytest
import torch

from alf.errors import ConfigError
from alf.trainers.checkpointer import Checkpointer

from conftest import TINY_PPO, build_trainer, train_run


def _finetune_gin(source: str, prefix: str = "_actor_network", frozen: bool = False,
                  extra: str = "") -> str:
    return TINY_PPO + f"""
PPOAlgorithm.actor_network_ctor = @pre/pretrained
pre/pretrained.ctor = @ActorDistributionNetwork
pre/pretrained.checkpoint = "{prefix}@{source}"
pre/pretrained.frozen = {frozen}
""" + extra


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A trained tiny PPO run and its actor's tensors (``_actor_network.*`` keys)."""
    root = train_run(tmp_path_factory.mktemp("src") / "run", TINY_PPO)
    _, state, _ = Checkpointer(os.path.join(root, "train")).load_latest()
    actor = {k[len("_actor_network."):]: v for k, v in state["algorithm"].items()
             if k.startswith("_actor_network.")}
    assert actor
    return root, actor


def _actor(trainer):
    return trainer.algorithm._actor_network


def test_prefix_loads_exactly_the_source_tensors(clean_gin, source, tmp_path):
    root, actor = source
    trainer = build_trainer(tmp_path / "ft", _finetune_gin(root))
    own = _actor(trainer).state_dict()
    assert own.keys() == actor.keys()
    for k, v in actor.items():
        assert torch.equal(own[k], v), k
    # the critic is not touched: it is the fresh one of a from-scratch build
    assert all(p.requires_grad for p in trainer.algorithm.parameters())


def test_a_pt_file_and_the_whole_algorithm(clean_gin, source, tmp_path):
    """A ``.pt`` file works like a run directory; an empty prefix loads every tensor."""
    root, actor = source
    ckpt = Checkpointer(os.path.join(root, "train")).list_checkpoints()[0][1]
    extra = f"""
TrainerConfig.algorithm_ctor = @whole/pretrained
whole/pretrained.ctor = @PPOAlgorithm
whole/pretrained.checkpoint = "@{root}"
"""
    trainer = build_trainer(tmp_path / "ft", _finetune_gin(ckpt, extra=extra))
    _, state, _ = Checkpointer(os.path.join(root, "train")).load_latest()
    own = trainer.algorithm.state_dict()
    for k, v in state["algorithm"].items():
        if isinstance(v, torch.Tensor) and not k.startswith("_data_transformer."):
            assert torch.equal(own[k], v), k


def test_frozen_stays_fixed_and_has_no_optimizer(clean_gin, source, tmp_path):
    root, actor = source
    trainer = build_trainer(tmp_path / "ft", _finetune_gin(root, frozen=True))
    alg = trainer.algorithm
    frozen = {id(p) for p in _actor(trainer).parameters()}
    assert frozen and not any(p.requires_grad for p in _actor(trainer).parameters())
    critic_before = {k: v.clone() for k, v in alg._value_network.state_dict().items()}
    trainer.run()
    optimized = {id(p) for opt in alg.optimizers() for g in opt.param_groups
                 for p in g["params"]}
    assert optimized and not (optimized & frozen), "a frozen parameter has an optimizer"
    for k, v in _actor(trainer).state_dict().items():
        assert torch.equal(v, actor[k]), f"frozen {k} changed in training"
    assert any(not torch.equal(v, critic_before[k])
               for k, v in alg._value_network.state_dict().items()), "nothing trained"


def test_resume_keeps_the_trained_weights(clean_gin, source, tmp_path):
    """The run's own checkpoint wins over the pretrained source on a resume."""
    root, actor = source
    run = tmp_path / "ft"
    first = build_trainer(run, _finetune_gin(root))
    first.run()
    trained = {k: v.clone() for k, v in _actor(first).state_dict().items()}
    assert any(not torch.equal(v, actor[k]) for k, v in trained.items()), "nothing trained"
    gin.clear_config()
    second = build_trainer(run, _finetune_gin(root), ["TrainerConfig.num_iterations=8"])
    assert second.restore_checkpoint()
    for k, v in _actor(second).state_dict().items():
        assert torch.equal(v, trained[k]), f"{k}: the pretrained source was loaded over it"


def _error(tmp_path, text: str, params=()) -> str:
    with pytest.raises(ConfigError) as e:
        build_trainer(tmp_path / "ft", text, params)
    msg = str(e.value).splitlines()[0]  # gin appends "In call to configurable ..." lines
    assert not os.path.exists(tmp_path / "ft")
    return msg


def test_missing_path(clean_gin, tmp_path):
    msg = _error(tmp_path, _finetune_gin(str(tmp_path / "nope")))
    assert "pre/pretrained.checkpoint" in msg and "nope' does not exist" in msg


def test_run_without_checkpoint(clean_gin, tmp_path):
    (tmp_path / "empty").mkdir()
    msg = _error(tmp_path, _finetune_gin(str(tmp_path / "empty")))
    assert "holds no checkpoint" in msg and "train" in msg


def test_wrong_prefix_lists_the_parts_and_suggests(clean_gin, source, tmp_path):
    root, _ = source
    msg = _error(tmp_path, _finetune_gin(root, prefix="_actor_netwrk"))
    assert "'_actor_netwrk' matches no key" in msg
    assert "_value_network" in msg and "Did you mean: _actor_network?" in msg
    assert "ActorDistributionNetwork (pre/pretrained)" in msg


def test_shape_mismatch_names_both_sides(clean_gin, source, tmp_path):
    root, _ = source
    ckpt = Checkpointer(os.path.join(root, "train")).list_checkpoints()[0][1]
    msg = _error(tmp_path, _finetune_gin(root) + "pre/ActorDistributionNetwork.fc_layer_params"
                 " = (16,)\n")
    assert "shape mismatch" in msg and f"{ckpt}:_actor_network." in msg
    assert "[8, 4]" in msg and "[16, 4]" in msg
    assert "ActorDistributionNetwork (pre/pretrained)" in msg


def test_unreadable_file(clean_gin, tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint at all")
    msg = _error(tmp_path, _finetune_gin(str(bad)))
    assert "cannot read" in msg and "bad.pt" in msg


def test_cli_wrong_prefix_exits_2_and_writes_nothing(alf_cli, source, tmp_path):
    root, _ = source
    (tmp_path / "ft.gin").write_text(_finetune_gin(root, prefix="_actr"))
    p = alf_cli.run("alf.bin.train", ["--conf", "ft.gin", "--root_dir", "runs/ft"], tmp_path)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "'_actr' matches no key" in lines[0], p.stderr
    assert "Did you mean: _actor_network?" in lines[0]
    assert not os.path.exists(tmp_path / "runs")


def test_example_loads_a_bc_actor(clean_gin, tmp_path):
    """alf/examples/ppo_pendulum_from_bc.gin builds PPO's actor exactly as BcAlgorithm's."""
    from alf.algorithms.bc_algorithm import BcAlgorithm
    from alf.tensor_specs import BoundedTensorSpec
    bc = BcAlgorithm(observation_spec=BoundedTensorSpec((3,), torch.float32, -8, 8),
                     action_spec=BoundedTensorSpec((1,), torch.float32, -2, 2))
    torch.save({"algorithm": bc.state_dict()}, tmp_path / "bc.pt")
    trainer = build_trainer(tmp_path / "ft", "include 'ppo_pendulum_from_bc.gin'\n",
                            [f"bc_actor/pretrained.checkpoint='_actor@{tmp_path / 'bc.pt'}'",
                             "TrainerConfig.evaluate=False"])
    own = _actor(trainer).state_dict()
    assert own.keys() == bc._actor.state_dict().keys()
    for k, v in bc._actor.state_dict().items():
        assert torch.equal(own[k], v), k
