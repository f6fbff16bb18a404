"""One reward weight as a parameter: ``Agent.reward_weights[i]=value`` sets element ``i``
of the configured list (``--conf_param``, sweeps' and PBT's ``--param``), so a study
tunes the bonus's weight directly (docs/experiments.md)."""
import csv
import glob
import os

import gin
import pytest

from alf import config as alf_config
from alf.errors import ConfigError
from alf.trainers.checkpointer import Checkpointer

TINY = """
include 'ppo_cart_pole.gin'
create_environment.num_parallel_environments = 2
ActorDistributionNetwork.fc_layer_params = (8,)
ValueNetwork.fc_layer_params = (8,)
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 8
TrainerConfig.num_updates_per_train_iter = 1
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 1
TrainerConfig.progress_interval_seconds = 0.0
TrainerConfig.num_env_steps = 64
TrainerConfig.algorithm_ctor = @Agent
Agent.rl_algorithm_cls = @PPOAlgorithm
Agent.reward_modules = [@CountRewardModule]
Agent.reward_weights = [1.0, 0.1]
CountRewardModule.code_bits = 8
"""


def test_an_element_binding_sets_one_weight(clean_gin, alf_cli, tmp_path):
    conf = alf_cli.write_gin(tmp_path, TINY)
    alf_config.parse_config(conf_file=conf, conf_params=["Agent.reward_weights[1]=0.25"])
    assert gin.query_parameter("Agent.reward_weights") == [1.0, 0.25]
    assert "Agent.reward_weights = [1.0, 0.25]" in alf_config.config_text()
    alf_config.parse_config(conf_file=conf, conf_params=[
        "Agent.reward_weights=[1.0, @w/LinearSchedule()]", "Agent.reward_weights[0] = 2"])
    assert repr(gin.query_parameter("Agent.reward_weights")) == "[2, @w/LinearSchedule()]"
    for param, message in (
            ("Agent.reward_weights[2]=0.5", "has 2 elements (0 to 1)"),
            ("Agent.value_per_reward_column[0]=1", "is not set in the config"),
            ("TrainerConfig.num_env_steps[0]=1", "is 64, not a list or tuple"),
            ("Agent.reward_weights[1]=@", "--conf_param 'Agent.reward_weights[1]=@'")):
        with pytest.raises(ConfigError) as e:
            alf_config.parse_config(conf_file=conf, conf_params=[param])
        assert "\n" not in str(e.value) and message in str(e.value), str(e.value)


def _weights(run_dir):
    _, state, _ = Checkpointer(os.path.join(run_dir, "train")).load_latest()
    return [round(w, 6) for w in state["algorithm"]["_reward_weights"].tolist()]


def test_a_sweep_over_a_reward_weight(alf_cli, tmp_path):
    alf_cli.write_gin(tmp_path, TINY)
    sweep = alf_cli.run("alf.bin.sweep", [
        "--conf", "tiny.gin", "--study_dir", "study", "--metric", "train_return",
        "--param", "Agent.reward_weights[1]=[0.0, 0.5]"], tmp_path, timeout=300)
    assert sweep.returncode == 0, sweep.stderr
    runs = sorted(glob.glob(str(tmp_path / "study" / "runs" / "*" / "seed_0")))
    assert [os.path.basename(os.path.dirname(r)) for r in runs] == [
        "reward_weights_1_=0.0", "reward_weights_1_=0.5"]
    for run, weight in zip(runs, (0.0, 0.5)):
        assert f"Agent.reward_weights = [1.0, {weight}]" in open(
            os.path.join(run, "config.gin")).read()
        assert _weights(run) == [1.0, weight]


def test_pbt_tunes_a_reward_weight_and_each_segment_uses_its_value(alf_cli, tmp_path):
    alf_cli.write_gin(tmp_path, TINY)
    pbt = alf_cli.run("alf.bin.pbt", [
        "--conf", "tiny.gin", "--study_dir", "pbt", "--metric", "train_return",
        "--param", "Agent.reward_weights[1]=uniform(0.0, 1.0)", "--population=2",
        "--interval=32", "--quantile=0.5"], tmp_path, timeout=300)
    assert pbt.returncode == 0, pbt.stderr
    with open(tmp_path / "pbt" / "lineage.csv") as f:
        rows = list(csv.DictReader(f))
    assert sorted((int(r["gen"]), int(r["member"])) for r in rows) == \
        [(0, 0), (0, 1), (1, 0), (1, 1)]
    for member in (0, 1):
        last = [r for r in rows if int(r["member"]) == member and r["gen"] == "1"][0]
        value = float(last["Agent.reward_weights[1]"])
        assert 0.0 <= value <= 1.2
        # the value of its last segment is the one the run trained with (and summarised)
        assert _weights(str(tmp_path / "pbt" / "members" / f"m{member}")) == \
            pytest.approx([1.0, value], abs=1e-5)
