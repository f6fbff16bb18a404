"""PBT without training: initial spread, exploit/explore decisions, which parameters may
change mid-run, the checkpoint copy, and that a changed learning rate takes effect on
resume (the premise of running members in segments)."""
import math

import numpy as np
import pytest

from alf import config as alf_config
from alf.errors import ConfigError
from alf.studies import pbt_population as pop
from alf.studies.pbt_checkpoints import copy_checkpoint
from alf.studies.pbt_params import MUTABLE, check_mutable
from alf.studies.search_space import parse_param


def test_initial_values_spread_over_a_log_range():
    lr = parse_param("Adam.lr=loguniform(1e-5, 1e-2)")
    members = pop.initial_hparams([lr], 4, seed=0)
    values = sorted(float(m["Adam.lr"]) for m in members)
    expected = [10 ** (-5 + 3 * (k + 0.5) / 4) for k in range(4)]
    np.testing.assert_allclose(values, expected, rtol=5e-6)  # 6 significant digits
    listed = pop.initial_hparams([parse_param("A.b=[1, 2, 3]")], 4, seed=0)
    assert [m["A.b"] for m in listed] == ["1", "2", "3", "1"]


def test_bottom_quantile_copies_a_top_member_and_explores():
    lr = parse_param("Adam.lr=loguniform(1e-5, 1e-2)")
    hparams = [{"Adam.lr": v} for v in ("0.001", "0.002", "0.003", "0.004")]
    rng = pop.member_rng(0, 3)
    decisions = pop.decide([1.0, 4.0, None, 2.0], hparams, [lr], rng, quantile=0.25,
                           resample_probability=0.0)
    # member 2 failed (ranks last) and copies the best, member 1; the rest are kept
    assert [(d.member, d.parent, d.event) for d in decisions] == [
        (0, 0, "kept"), (1, 1, "kept"), (2, 1, "exploit m1 + explore"), (3, 3, "kept")]
    assert float(decisions[2].hparams["Adam.lr"]) in (pytest.approx(0.0016), pytest.approx(0.0024))
    assert decisions[0].hparams == hparams[0]
    # a failed member is never a parent (3 of 4 failed: the 4th is kept, nobody copies)
    failed = pop.decide([None, None, 3.0, None], hparams, [lr], rng, 0.5, 0.0)
    assert all(d.parent in (d.member, 2) for d in failed)
    tied = pop.decide([500.0] * 4, hparams, [lr], rng, 0.25, 0.0)
    assert all(d.event == "kept" for d in tied)  # nothing to gain from a tie
    baseline = pop.decide([1.0, 4.0, 3.0, 2.0], hparams, [lr], rng, 0.25, 0.0, exploit=False)
    assert all(d.event == "kept" for d in baseline)
    # the same scores and seed give the same decisions in any process
    again = pop.decide([1.0, 4.0, None, 2.0], hparams, [lr], pop.member_rng(0, 3), 0.25, 0.0)
    assert again == decisions


def test_explore_clips_a_range_and_moves_a_list_value_to_a_neighbour():
    rng = np.random.default_rng(1)
    lr = parse_param("Adam.lr=uniform(0.1, 0.5)")
    scaled = {pop.perturb(lr, "0.45", rng, 0.0) for _ in range(50)}
    assert scaled == {"0.36", "0.5"}  # x0.8, or x1.2 clipped to the high bound
    listed = parse_param("A.b=[1, 2, 3]")
    assert {pop.perturb(listed, "1", rng, 0.0) for _ in range(50)} == {"1", "2"}
    resampled = [float(pop.perturb(lr, "0.45", rng, 1.0)) for _ in range(50)]
    assert all(0.1 <= v <= 0.5 for v in resampled) and len(set(resampled)) > 40


def test_only_parameters_that_can_change_mid_run_are_accepted():
    for name in ("lr/LinearSchedule.start", "Adam.lr", "alf.optimizers.Adam.lr",
                 "PPOLoss.entropy_regularization", "clip/LinearSchedule.end"):
        check_mutable(name)
    for name, why in (("ActorDistributionNetwork.fc_layer_params", "read once"),
                      ("alf.optimizers.Adam.betas", "Adam.{gradient_clipping,lr}"),
                      ("SacAlgorithm.initial_alpha", "SacAlgorithm.{gamma,")):
        with pytest.raises(ConfigError) as e:
            check_mutable(name)
        assert "\n" not in str(e.value) and name in str(e.value) and why in str(e.value)


def test_every_listed_parameter_exists():
    for configurable, params in MUTABLE.items():
        known = alf_config._configurable_params(configurable)
        assert params <= set(known), (configurable, params - set(known))


def _ckpt(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())


def test_copy_checkpoint_keeps_the_members_own_replay_buffer_unless_asked(tmp_path):
    src, dst = tmp_path / "m0", tmp_path / "m1"
    _ckpt(src / "train" / "ckpt-0000000010.pt", "winner 10")
    _ckpt(src / "train" / "replay_buffer-0000000010.pt", "winner data")
    _ckpt(dst / "train" / "ckpt-0000000008.pt", "loser 8")
    _ckpt(dst / "train" / "ckpt-0000000010.pt", "loser 10")
    _ckpt(dst / "train" / "replay_buffer-0000000010.pt", "loser data")
    path = copy_checkpoint(str(src), str(dst))
    assert open(path).read() == "winner 10"
    assert (dst / "train" / "replay_buffer-0000000010.pt").read_text() == "loser data"
    assert (dst / "train" / "ckpt-0000000008.pt").read_text() == "loser 8"
    copy_checkpoint(str(src), str(dst), copy_replay_buffer=True)
    assert (dst / "train" / "replay_buffer-0000000010.pt").read_text() == "winner data"
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        copy_checkpoint(str(tmp_path / "empty"), str(dst))


def test_a_new_learning_rate_takes_effect_when_a_member_resumes(make_trainer, alf_cli, tmp_path):
    root = tmp_path / "member"
    params = ["TrainerConfig.num_iterations=0", "TrainerConfig.num_env_steps=64"]
    first = make_trainer(root, alf_cli.TINY_PPO, params + [
        "alf.optimizers.Adam.lr=0.001", "TrainerConfig.stop_at_env_steps=32"])
    first.run()
    lrs = [g["lr"] for opt, _, _ in first.algorithm._optimizers for g in opt.param_groups]
    assert lrs and all(math.isclose(lr, 0.001) for lr in lrs)
    second = make_trainer(root, alf_cli.TINY_PPO, params + ["alf.optimizers.Adam.lr=0.0003"])
    second.run()  # restores the optimizer state (with lr 0.001), then steps with 0.0003
    lrs = [g["lr"] for opt, _, _ in second.algorithm._optimizers for g in opt.param_groups]
    assert second._context.env_steps == 64 and all(math.isclose(lr, 0.0003) for lr in lrs)


def test_progress_lines_say_failed_for_a_member_without_a_score(tmp_path):
    """The exploit line said ``m0 (None) <- m1 (5.25)``."""
    import optuna
    from alf.studies import study_store as store
    from alf.studies.objective import Objective
    from alf.studies.pbt import PbtSettings, Population
    from alf.studies.search_space import SearchSpace
    space = SearchSpace.parse(["Adam.lr=loguniform(1e-5, 1e-2)"], [0])
    settings = PbtSettings("ppo_cart_pole.gin", space, 2, 100, 200, Objective.parse("final"),
                           quantile=0.5, resample_probability=0.0)
    study = store.load_study(optuna.storages.InMemoryStorage(), "p", settings.spec(),
                             "maximize", optuna.samplers.RandomSampler(),
                             optuna.pruners.NopPruner())
    said = []
    population = Population(settings, study, str(tmp_path), said.append)
    _ckpt(tmp_path / "members" / "m1" / "train" / "ckpt-0000000010.pt", "m1 at 10")
    population._next_generation(0, [None, 5.25], [{"Adam.lr": "0.001"}, {"Adam.lr": "0.002"}])
    (line,) = said
    assert line.startswith("[pbt] gen 0: m0 (failed) <- m1 (5.25), explore: Adam.lr="), line
    assert (tmp_path / "members" / "m0" / "train" / "ckpt-0000000010.pt").read_text() == \
        "m1 at 10"
