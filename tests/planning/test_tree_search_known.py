"""The batched search on problems with known answers: a bandit, a discounted two-step
tree, tic-tac-toe (two players), legal masks, Dirichlet noise, Gumbel with few
simulations."""
import pytest
import torch

from alf.planning.tree_search import TreeSearch
from tests.planning.toy_models import BanditModel, RandomModel, TicTacToeModel, TwoStepModel


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("selection", ["visit_count", "gumbel"])
def test_bandit_visits_concentrate_on_the_best_arm(selection):
    means = [0.1, 0.5, 0.9, 0.3, 0.2]
    search = TreeSearch(num_simulations=60, discount=1.0, action_selection=selection,
                        temperature=0.0, root_exploration_fraction=0.0)
    out = search.search(BanditModel(means), torch.zeros(3, 1), generator=_gen())
    assert out.action.tolist() == [2, 2, 2]
    if selection == "visit_count":
        assert (out.visit_counts.argmax(-1) == 2).all() and (out.visit_counts[:, 2] > 30).all()
        assert out.policy[:, 2].tolist() == pytest.approx((out.visit_counts[:, 2] / 60).tolist())
    else:  # halving ends with two finalists sharing the most visits; the policy picks
        assert (out.visit_counts[:, 2] == out.visit_counts.max(-1).values).all()
        assert (out.policy[:, 2] > 0.9).all()
    assert out.q_values[0].tolist() == pytest.approx(means)


@pytest.mark.parametrize("selection", ["visit_count", "gumbel"])
@pytest.mark.parametrize("discount,best", [(0.9, 1), (0.4, 0)])
def test_two_steps_the_discount_decides(selection, discount, best):
    """Action 1 pays 1.0 one step later: worth ``discount`` against action 0's 0.5."""
    search = TreeSearch(num_simulations=30, discount=discount, action_selection=selection,
                        temperature=0.0, root_exploration_fraction=0.0, gumbel_scale=0.0)
    out = search.search(TwoStepModel(), torch.zeros(2, 1), generator=_gen())
    assert out.action.tolist() == [best, best]
    # Q is the mean backed-up return: action 1's first visit saw only the value 0
    n = float(out.visit_counts[0, 1])
    assert out.q_values[0].tolist() == pytest.approx([0.5, discount * (n - 1) / n])


def _board(x, o):
    b = torch.zeros(9)
    b[list(x)], b[list(o)] = 1.0, -1.0
    return b


# X (+1, to move) at 0, 1; O at 3, 4: 2 wins, else O wins at 5.
WIN = _board([0, 1], [3, 4])
# X at 0, 8; O at 3, 4: X has no win; only 5 stops O's row.
BLOCK = _board([0, 8], [3, 4])


@pytest.mark.parametrize("selection", ["visit_count", "gumbel"])
def test_tic_tac_toe_wins_and_blocks(selection):
    boards = torch.stack([WIN, BLOCK, -WIN])  # row 2: O to move (the board flipped) at WIN
    legal = boards == 0
    search = TreeSearch(num_simulations=200, discount=1.0, action_selection=selection,
                        two_player=True, temperature=0.0, root_exploration_fraction=0.0,
                        max_considered_actions=9, gumbel_scale=0.0)
    out = search.search(TicTacToeModel(), boards, legal_mask=legal, generator=_gen())
    assert out.action.tolist() == [2, 5, 5]  # row 2: O wins at 5 (3, 4, 5)
    assert float(out.q_values[0, 2]) == pytest.approx(1.0)
    assert float(out.q_values[2, 5]) == pytest.approx(1.0)
    assert (out.visit_counts[~legal] == 0).all()


def test_two_player_flag_flips_the_opponents_reward():
    """Two players on the two-step tree: action 1's later 1.0 is the opponent's reward,
    so it is worth ``-discount`` to the root's mover and action 0 wins at any discount."""
    search = TreeSearch(num_simulations=30, discount=0.9, two_player=True, temperature=0.0,
                        root_exploration_fraction=0.0)
    out = search.search(TwoStepModel(), torch.zeros(1, 1))
    n = float(out.visit_counts[0, 1])
    assert int(out.action[0]) == 0
    assert out.q_values[0].tolist() == pytest.approx([0.5, -0.9 * (n - 1) / n])


@pytest.mark.parametrize("selection", ["visit_count", "gumbel"])
def test_illegal_actions_are_never_visited_nor_taken(selection):
    b, a = 6, 7
    g = _gen(3)
    legal = torch.rand(b, a, generator=g) < 0.4
    legal[torch.arange(b), torch.randint(0, a, (b,), generator=g)] = True
    model = RandomModel(b, a, seed=3)
    search = TreeSearch(num_simulations=50, action_selection=selection, temperature=1.0)
    out = search.search(model, torch.randn(b, 4, generator=g), legal, generator=_gen(4))
    assert (out.visit_counts[~legal] == 0).all()
    assert (out.policy[~legal] == 0).all() and (out.prior[~legal] == 0).all()
    assert legal[torch.arange(b), out.action].all()
    assert out.policy.sum(-1).tolist() == pytest.approx([1.0] * b)


@pytest.mark.parametrize("fraction", [0.25, 0.5])
def test_dirichlet_noise_moves_the_root_prior_by_its_fraction(fraction):
    b, a = 5, 6
    legal = torch.ones(b, a, dtype=torch.bool)
    legal[:, 4] = False
    model = RandomModel(b, a, seed=5)
    obs = torch.randn(b, 4, generator=_gen(5), dtype=torch.float64)
    prior = model.initial_inference(obs)[1].masked_fill(~legal, float("-inf")).softmax(-1)
    search = TreeSearch(num_simulations=4, root_exploration_fraction=fraction,
                        dirichlet_alpha=0.3)
    out = search.search(model, obs, legal, generator=_gen(6))
    noise = (out.prior - (1 - fraction) * prior) / fraction
    assert (noise >= 0).all() and (noise[:, 4] == 0).all()
    assert noise.sum(-1).tolist() == pytest.approx([1.0] * b)
    assert (noise - prior).abs().sum(-1).min() > 0.05  # a real draw, not the prior
    quiet = TreeSearch(num_simulations=4, root_exploration_fraction=0.0).search(model, obs, legal)
    assert torch.allclose(quiet.prior, prior)


def test_gumbel_with_few_simulations_takes_the_best_considered_action():
    """As many simulations as considered actions: each considered action is visited
    once, none else, and the action is the argmax of ``g + logits + sigma(q)`` among
    them, which with a large ``c_scale`` is the argmax of the completed Q."""
    b, a, m = 8, 10, 4
    model = RandomModel(b, a, seed=7)
    obs = torch.randn(b, 4, generator=_gen(7), dtype=torch.float64)
    search = TreeSearch(num_simulations=m, action_selection="gumbel", max_considered_actions=m,
                        c_scale=100.0)
    out = search.search(model, obs, generator=_gen(8))
    considered = out.visit_counts == 1
    assert considered.sum(-1).tolist() == [m] * b
    assert (out.visit_counts[~considered] == 0).all()
    best = out.q_values.masked_fill(~considered, float("-inf")).argmax(-1)
    assert out.action.tolist() == best.tolist()
    assert (out.policy.argmax(-1) == best).all()  # the improved policy agrees


def test_one_model_call_per_simulation_for_the_whole_batch():
    class Counting(RandomModel):
        calls = 0

        def recurrent_inference(self, latent, action):
            Counting.calls += 1
            assert latent.shape[0] == 5 and action.shape == (5,)
            return super().recurrent_inference(latent, action)

    model = Counting(5, 3, seed=9)
    TreeSearch(num_simulations=12).search(model, torch.zeros(5, 4), generator=_gen())
    assert Counting.calls == 12


def test_visit_count_actions_follow_the_tempered_visits():
    """Temperature 1 draws actions in proportion to the visits; temperature 0.5 in
    proportion to their squares."""
    n = 4000
    search = TreeSearch(num_simulations=20, discount=1.0, root_exploration_fraction=0.0)
    model, obs = BanditModel([0.2, 0.6, 0.4]), torch.zeros(n, 1)
    for t, power in ((1.0, 1.0), (0.5, 2.0)):
        out = search.search(model, obs, generator=_gen(11), temperature=t)
        want = out.visit_counts[0] ** power
        freq = torch.bincount(out.action, minlength=3) / n
        assert freq.tolist() == pytest.approx((want / want.sum()).tolist(), abs=0.03)


@pytest.mark.parametrize("reward", [1.0, 100.0])
def test_gumbel_policy_does_not_depend_on_the_reward_scale_before_a_spread(reward):
    """Every arm pays ``reward`` and the tree has seen one value (no min-max spread):
    the improved policy is the softmax of the prior logits alone, whatever the scale
    (an unnormalised completed Q once gave [0.42, 0.42, 0.08, 0.08] at reward 1 and
    [0.5, 0.5, 0, 0] at 100)."""
    search = TreeSearch(num_simulations=2, discount=1.0, action_selection="gumbel",
                        gumbel_scale=0.0, root_exploration_fraction=0.0)
    out = search.search(BanditModel([reward] * 4), torch.zeros(1, 1), generator=_gen())
    assert out.policy[0].tolist() == pytest.approx([0.25] * 4)
