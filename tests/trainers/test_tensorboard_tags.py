"""docs/quickstart.md's TensorBoard tables are the contract: a tiny run of each algorithm
family writes exactly the tags they document for it (every tag documented, every
*every summary* tag written, each with its ``_vs_EnvironmentSteps`` twin), and the
diagnostics carry the right values (PPO's clip range is the schedule's at that
iteration). The tables are parsed here, so the docs and the code cannot drift."""
import math
import os
import re
from typing import Dict, List, Optional, Sequence, Set, Tuple

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conftest import REPO_ROOT, train_run
from test_offline_training import make_random_dataset

DOC = os.path.join(REPO_ROOT, "docs", "quickstart.md")

_TINY = """
create_environment.num_parallel_environments = 2
TrainerConfig.num_env_steps = 0
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 1
TrainerConfig.checkpoint_interval = 1000
"""
_ON_POLICY = _TINY + """
ActorDistributionNetwork.fc_layer_params = (8,)
ValueNetwork.fc_layer_params = (8,)
TrainerConfig.unroll_length = 8
TrainerConfig.num_iterations = 3
"""
_MINI_BATCHES = """
TrainerConfig.mini_batch_size = 8
TrainerConfig.num_updates_per_train_iter = 2
"""
_PENDULUM = _TINY + """
CriticNetwork.fc_layer_params = (8,)
TrainerConfig.initial_collect_steps = 8
TrainerConfig.num_iterations = 6
TrainerConfig.mini_batch_size = 8
TrainerConfig.unroll_length = 2
TrainerConfig.replay_buffer_length = 64
"""
_DDPG = "include 'ddpg_pendulum.gin'\n" + _PENDULUM + "ActorNetwork.fc_layer_params = (8,)\n"
# pure offline (bc_pendulum.gin, iql_pendulum.gin) from a random Pendulum dataset that the
# runs fixture writes (its path bound as TrainerConfig.offline_buffer_dir)
_OFFLINE = _TINY + """
TrainerConfig.num_iterations = 3
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.mini_batch_size = 8
"""


class Family:
    """One tiny run: its gin, the doc section of its RL algorithm, the optimizers of each
    algorithm that takes gradient steps (name -> count), and which conditions of the
    tables' *Written* column hold for it."""

    def __init__(self, conf: str, section: str, trainers: Dict[str, int],
                 conditions: Sequence[str] = ("without reward columns",),
                 columns: Sequence[str] = (), params: Sequence[str] = (),
                 offline: bool = False):
        self.conf, self.section, self.trainers = conf, section, trainers
        self.conditions, self.columns, self.params = set(conditions), list(columns), params
        self.name = next(iter(trainers))
        self.offline = offline  # trains from the fixture's dataset, steps no env


FAMILIES = {
    "ppo": Family("include 'ppo_cart_pole.gin'\n" + _ON_POLICY + _MINI_BATCHES,
                  "PPOAlgorithm", {"PPOAlgorithm": 1}),
    "a2c": Family("include 'ac_cart_pole.gin'\n" + _ON_POLICY, "ActorCriticAlgorithm",
                  {"ActorCriticAlgorithm": 1}),
    "appo": Family("include 'appo_cart_pole.gin'\n" + _ON_POLICY + _MINI_BATCHES
                   + "TrainerConfig.async_unroll = False\n", "APPOAlgorithm",
                   {"APPOAlgorithm": 1}, ("without reward columns", "APPO only")),
    "impala": Family("include 'impala_cart_pole.gin'\n" + _ON_POLICY
                     + "TrainerConfig.async_unroll = False\n", "ImpalaAlgorithm",
                     {"ImpalaAlgorithm": 1}),
    "sac": Family("include 'sac_pendulum.gin'\n" + _PENDULUM
                  + "ActorDistributionNetwork.fc_layer_params = (8,)\n", "SacAlgorithm",
                  {"SacAlgorithm": 3}),
    "ddpg": Family(_DDPG, "DdpgAlgorithm", {"DdpgAlgorithm": 2}),
    "td3": Family(_DDPG + "TrainerConfig.algorithm_ctor = @Td3Algorithm\n"
                  "Td3Algorithm.actor_optimizer = @alf.optimizers.Adam()\n"
                  "Td3Algorithm.critic_optimizer = @alf.optimizers.Adam()\n",
                  "Td3Algorithm", {"Td3Algorithm": 2}),
    "dqn": Family("include 'dqn_cart_pole.gin'\n" + _TINY + """
QNetwork.fc_layer_params = (8,)
TrainerConfig.initial_collect_steps = 8
TrainerConfig.num_iterations = 6
TrainerConfig.mini_batch_size = 8
TrainerConfig.unroll_length = 4
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.replay_buffer_length = 64
""", "DqnAlgorithm", {"DqnAlgorithm": 1}),
    "bc": Family("include 'bc_pendulum.gin'\n" + _OFFLINE, "BcAlgorithm",
                 {"BcAlgorithm": 1}, ("BC only",), offline=True),
    "iql": Family("include 'iql_pendulum.gin'\n" + _OFFLINE
                  + "CriticNetwork.fc_layer_params = (8,)\n", "IqlAlgorithm",
                  {"IqlAlgorithm": 2}, ("IQL only",), offline=True),
    # PPO + RND at mini_batch_length 1 (ppo_rnd_cart_pole.gin's): the module trains on
    # single steps; PPO learns a value per reward column (extrinsic, RND)
    "agent": Family("include 'ppo_rnd_cart_pole.gin'\n" + _ON_POLICY + _MINI_BATCHES + """
RNDRewardModule.fc_layer_params = (8,)
RNDRewardModule.feature_size = 4
TrainerConfig.mini_batch_length = 1
""", "PPOAlgorithm", {"PPOAlgorithm": 1, "RNDRewardModule": 1},
                    ("with reward columns", "with reward modules",
                     "with reward modules or an env's reward columns"),
                    columns=["extrinsic", "RNDRewardModule"]),
}


# ------------------------------------------------------------------ the docs
Row = Tuple[List[str], str]  # (tags with placeholders, the Written cell)


def doc_sections() -> Dict[str, List[Row]]:
    """``{### heading: [(tags, written)]}`` of the TensorBoard section's tables."""
    text = open(DOC).read()
    body = text[text.index("## TensorBoard"):]
    body = body[:body.index("\n## ", 5)]
    sections: Dict[str, List[Row]] = {}
    heading = None
    for line in body.splitlines():
        if line.startswith("### "):
            heading = line[4:]
            sections[heading] = []
        elif heading and line.startswith("| `"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            sections[heading].append((_tags_of(cells[0]), cells[1]))
    return sections


def _tags_of(cell: str) -> List[str]:
    """```A/b/x`, `y``` -> ``["A/b/x", "A/b/y"]`` (later names share the first's group)."""
    names = re.findall(r"`([^`]+)`", cell)
    group = names[0].rpartition("/")[0]
    return [names[0]] + [f"{group}/{n}" for n in names[1:]]


def _section(sections: Dict[str, List[Row]], startswith: str = "",
             cls: Optional[str] = None) -> List[Row]:
    for heading, rows in sections.items():
        if (cls and f"`{cls}`" in heading) or (startswith and heading.startswith(startswith)):
            return rows
    raise AssertionError(f"docs/quickstart.md has no TensorBoard section for "
                         f"{cls or startswith!r}: {sorted(sections)}")


def _expand(tag: str, values: Dict[str, Sequence[str]]) -> List[str]:
    out = [tag]
    for key, options in values.items():
        out = [t.replace(f"<{key}>", str(o)) for t in out for o in
               (options if f"<{key}>" in t else [None])]
    return out


def _pattern(tag: str, values: Dict[str, Sequence[str]]) -> str:
    for key, options in values.items():
        if len(options) == 1:
            tag = tag.replace(f"<{key}>", options[0])
    escaped = re.escape(tag)
    return re.sub(r"<[a-z]+>", "[^/]+", escaped.replace(r"\<", "<").replace(r"\>", ">"))


def expected_tags(family: Family) -> Tuple[Set[str], List[str]]:
    """(the tags a run must write, patterns of every tag it may write)."""
    sections = doc_sections()
    groups: List[Tuple[List[Row], Dict[str, Sequence[str]]]] = [
        (_section(sections, "Every run"), {})]
    for name, count in family.trainers.items():
        groups.append((_section(sections, "Every algorithm"),
                       {"Algorithm": [name], "k": [str(k) for k in range(count)]}))
    agent = {"Algorithm": [family.name], "i": [str(i) for i in range(len(family.columns))],
             "column": family.columns, "module": family.columns[1:]}
    groups.append((_section(sections, cls=family.section), agent))
    if family.columns:
        groups.append((_section(sections, cls="Agent"), agent))
    required, allowed = set(), []
    for rows, values in groups:
        for tags, written in rows:
            head, _, condition = written.partition(", ")
            if head != "every summary":
                allowed.extend(_pattern(t, values) for t in tags)  # optional
            elif not condition or condition in family.conditions:
                for tag in tags:
                    required.update(_expand(tag, values))
                    allowed.append(_pattern(tag, values))
    return required, allowed


# ------------------------------------------------------------------ the runs
def scalars(root) -> Dict[str, List[Tuple[int, float]]]:
    acc = EventAccumulator(str(root), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def _twin(tag: str) -> str:
    group, _, name = tag.rpartition("/")
    return f"{group}_vs_EnvironmentSteps/{name}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    cache, datasets = {}, []

    def run(key: str) -> Dict[str, List[Tuple[int, float]]]:
        if key not in cache:
            family = FAMILIES[key]
            params = list(family.params)
            if family.offline:
                if not datasets:  # 2 rows x 40 random Pendulum steps, written once
                    datasets.append(make_random_dataset(
                        tmp_path_factory.mktemp("dataset") / "pendulum", steps_per_row=40))
                params.append(f"TrainerConfig.offline_buffer_dir='{datasets[0]}'")
            root = tmp_path_factory.mktemp(key) / "run"
            cache[key] = scalars(train_run(root, family.conf, params))
        return cache[key]
    return run


@pytest.mark.parametrize("key", sorted(FAMILIES))
def test_a_run_writes_exactly_its_documented_tags(runs, key):
    family = FAMILIES[key]
    written = runs(key)
    tags = {t for t in written if "_vs_EnvironmentSteps/" not in t}
    required, allowed = expected_tags(family)
    undocumented = sorted(t for t in tags if not any(re.fullmatch(p, t) for p in allowed))
    assert not undocumented, f"written but not in docs/quickstart.md: {undocumented}"
    missing = sorted(required - tags)
    assert not missing, f"documented but not written: {missing}"
    assert not [t for t in tags if _twin(t) not in written]
    assert len(written) == 2 * len(tags)  # nothing but the tags and their twins


def test_the_documented_tags_of_ppo_include_the_diagnostics():
    """The parser reads the tables (a broken table must not pass by requiring nothing)."""
    required, _ = expected_tags(FAMILIES["ppo"])
    for tag in ("Loss/PPOAlgorithm/explained_variance", "Loss/PPOAlgorithm/clip_range",
                "Value/PPOAlgorithm/advantage_max", "Value/PPOAlgorithm/return_std",
                "Optimizer/PPOAlgorithm/0/learning_rate", "Metrics/NumEpisodes"):
        assert tag in required, sorted(required)
    agent, _ = expected_tags(FAMILIES["agent"])
    assert {"Loss/PPOAlgorithm/explained_variance_1", "Value/PPOAlgorithm/value_mean_0",
            "Loss/RNDRewardModule/loss", "Reward/RNDRewardModule/weight",
            "Reward/extrinsic/weight", "Optimizer/RNDRewardModule/0/grad_norm"} <= agent
    assert "Loss/PPOAlgorithm/explained_variance" not in agent
    sac, _ = expected_tags(FAMILIES["sac"])
    assert {f"Optimizer/SacAlgorithm/{k}/learning_rate" for k in range(3)} <= sac
    bc, _ = expected_tags(FAMILIES["bc"])
    assert {"Loss/BcAlgorithm/bc_loss", "Loss/BcAlgorithm/action_error",
            "Optimizer/BcAlgorithm/0/grad_norm"} <= bc
    assert "Loss/BcAlgorithm/critic_loss" not in bc  # IQL's rows are not BC's
    iql, _ = expected_tags(FAMILIES["iql"])
    assert {"Loss/IqlAlgorithm/value_loss", "Loss/IqlAlgorithm/weight",
            "Value/IqlAlgorithm/target_q_mean", "Optimizer/IqlAlgorithm/1/grad_norm"} <= iql
    assert "Loss/IqlAlgorithm/bc_loss" not in iql


def test_ppo_clip_range_is_the_schedules_value_at_each_iteration(runs):
    """ppo_cart_pole.gin anneals the clip range 0.2 -> 0 over the run's progress
    (iteration / num_iterations = 3 here)."""
    from alf.utils.schedules import LinearSchedule
    points = runs("ppo")["Loss/PPOAlgorithm/clip_range"]
    assert [s for s, _ in points] == [1, 2, 3]
    for step, value in points:
        assert value == pytest.approx(LinearSchedule(0.2, 0.0)(step / 3), abs=1e-6)
    appo = runs("appo")["Loss/APPOAlgorithm/clip_range"]  # a constant 0.2
    assert [round(v, 6) for _, v in appo] == [0.2] * 3


def test_diagnostics_are_consistent(runs):
    """Statistics are ordered (min <= mean <= max, std >= 0) and finite; CartPole's
    returns vary, so the explained variance is defined and at most 1."""
    for key in ("ppo", "a2c", "impala", "sac", "dqn", "iql", "agent"):
        written = runs(key)
        prefixes = {t.rsplit("_", 1)[0] for t in written
                    if t.startswith("Value/") and t.endswith("_mean")}
        assert prefixes, key
        for p in prefixes:
            for (_, lo), (_, mean), (_, hi), (_, std) in zip(
                    written[p + "_min"], written[p + "_mean"], written[p + "_max"],
                    written[p + "_std"]):
                assert lo - 1e-5 <= mean <= hi + 1e-5 and std >= 0, (key, p)
        for tag, points in written.items():
            if "explained_variance" in tag and "_vs_" not in tag:
                assert all(math.isfinite(v) and v <= 1.0 for _, v in points), (tag, points)
