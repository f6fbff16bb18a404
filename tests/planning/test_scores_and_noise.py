"""The search's formulas on hand-computed values, and its seeded noise."""
import math

import pytest
import torch

from alf.planning import scores
from alf.planning.noise import sample_dirichlet, sample_gamma, sample_gumbel


def test_halving_schedule_by_hand():
    # 4 actions, 8 simulations: 2 phases; 4 x 1 visit, then the best 2 get 2 more each
    assert scores.halving_schedule(4, 8) == [0, 0, 0, 0, 1, 1, 2, 2]
    # 2 actions: one phase of floor(6 / 2) = 3 visits each
    assert scores.halving_schedule(2, 6) == [0, 0, 1, 1, 2, 2]
    assert scores.halving_schedule(1, 3) == [0, 1, 2]  # one action takes everything
    # fewer simulations than actions: one visit each to the first ones
    assert scores.halving_schedule(16, 5) == [0] * 5
    # 3 actions, 4 simulations: 2 phases of max(1, floor(4 / 6)) = 1 visit
    assert scores.halving_schedule(3, 4) == [0, 0, 0, 1]


def test_puct_by_hand():
    prior = torch.tensor([[0.5, 0.5]])
    visits = torch.tensor([[3.0, 0.0]])
    q = torch.tensor([[0.4, 0.0]])
    n = torch.tensor([4.0])
    c = 1.25 + math.log((4 + 19652 + 1) / 19652)
    got = scores.puct_scores(prior, visits, n, q, 1.25, 19652.0)
    assert got[0].tolist() == pytest.approx([0.4 + 0.5 * 2 / 4 * c, 0.5 * 2 / 1 * c])


def test_completed_q_mixes_value_and_visited_q():
    q = torch.tensor([[1.0, 0.0, 0.5]])
    visited = torch.tensor([[True, False, True]])
    prior = torch.tensor([[0.2, 0.5, 0.3]])
    visits = torch.tensor([[2.0, 0.0, 1.0]])
    raw = torch.tensor([0.1])
    mean_q = (0.2 * 1.0 + 0.3 * 0.5) / 0.5
    v_mix = (0.1 + 3 * mean_q) / 4
    got = scores.completed_q(q, visited, prior, visits, raw)
    assert got[0].tolist() == pytest.approx([1.0, v_mix, 0.5])
    none = scores.completed_q(q, torch.zeros_like(visited), prior, torch.zeros_like(visits), raw)
    assert none[0].tolist() == pytest.approx([0.1] * 3)  # nothing visited: the raw value


def test_sigma_and_interior_scores():
    visits = torch.tensor([[3.0, 1.0]])
    s = scores.sigma(torch.tensor([[0.5, 1.0]]), visits, 50.0, 0.1)
    assert s[0].tolist() == pytest.approx([53 * 0.1 * 0.5, 53 * 0.1])
    logits = torch.tensor([[0.0, math.log(3.0)]])  # pi' = [0.25, 0.75]
    got = scores.gumbel_interior_scores(logits, visits)
    assert got[0].tolist() == pytest.approx([0.25 - 3 / 5, 0.75 - 1 / 5])


@pytest.mark.parametrize("alpha", [0.3, 2.0])
def test_gamma_and_dirichlet_moments(alpha):
    g = sample_gamma(alpha, torch.Size([20000]), torch.float64, torch.device("cpu"),
                     torch.Generator().manual_seed(0))
    assert float(g.mean()) == pytest.approx(alpha, rel=0.05)
    assert float(g.var()) == pytest.approx(alpha, rel=0.1)
    legal = torch.ones(4000, 3, dtype=torch.bool)
    legal[:, 1] = False
    d = sample_dirichlet(alpha, legal, torch.float64, torch.Generator().manual_seed(1))
    assert (d[:, 1] == 0).all()
    assert torch.allclose(d.sum(-1), torch.ones(4000, dtype=torch.float64))
    assert d[:, 0].mean().item() == pytest.approx(0.5, abs=0.02)


def test_noise_is_fixed_by_the_generator():
    def draw(seed):
        return sample_gumbel(torch.Size([5]), torch.float32, torch.device("cpu"),
                             torch.Generator().manual_seed(seed))

    assert torch.equal(draw(3), draw(3)) and not torch.equal(draw(3), draw(4))
    big = sample_gumbel(torch.Size([20000]), torch.float64, torch.device("cpu"),
                        torch.Generator().manual_seed(0))
    assert float(big.mean()) == pytest.approx(0.5772, abs=0.03)  # Euler-Mascheroni
