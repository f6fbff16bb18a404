"""The batched search builds the same trees as the plain-Python per-env reference: same
visit counts, root values and Q, for several batch rows each with its own model."""
import pytest
import torch

from alf.planning.noise import sample_gumbel
from alf.planning.reference_search import ReferenceSearch
from alf.planning.tree_search import TreeSearch
from tests.planning.toy_models import RandomModel

B, A, SIMS = 4, 5, 40


def _inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(B, 4, generator=g, dtype=torch.float64)
    legal = torch.rand(B, A, generator=g) < 0.7
    legal[:, 0] = True  # every row keeps a legal action
    return RandomModel(B, A, seed=seed), obs, legal


@pytest.mark.parametrize("selection", ["visit_count", "gumbel"])
@pytest.mark.parametrize("two_player", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_same_visit_counts_as_the_reference(selection, two_player, seed):
    model, obs, legal = _inputs(seed)
    kw = dict(num_simulations=SIMS, discount=0.9, action_selection=selection,
              two_player=two_player, max_considered_actions=4)
    batched = TreeSearch(root_exploration_fraction=0.0, gumbel_scale=0.0, temperature=0.0,
                         **kw).search(model, obs, legal_mask=legal)
    reference = ReferenceSearch(root_exploration_fraction=0.0, **kw)
    for b in range(B):
        ref = reference.search(model.row(b), obs[b:b + 1], legal=legal[b].tolist())
        assert batched.visit_counts[b].tolist() == ref["visits"], (b, selection, two_player)
        assert int(batched.action[b]) == ref["action"]
        assert float(batched.value[b]) == pytest.approx(ref["value"], abs=1e-9)
        assert batched.q_values[b].tolist() == pytest.approx(ref["q"], abs=1e-9)
        assert batched.policy[b].tolist() == pytest.approx(ref["policy"], abs=1e-9)
    assert batched.visit_counts.sum(-1).tolist() == [SIMS] * B


def test_same_tree_with_the_same_dirichlet_noise():
    """The reference given the batched search's (seeded) noise grows the same trees."""
    model, obs, legal = _inputs(3)
    search = TreeSearch(num_simulations=SIMS, temperature=0.0, root_exploration_fraction=0.25)
    out = search.search(model, obs, legal_mask=legal, generator=torch.Generator().manual_seed(5))
    no_noise = model.initial_inference(obs)[1].masked_fill(~legal, float("-inf")).softmax(-1)
    noise = (out.prior - 0.75 * no_noise) / 0.25
    reference = ReferenceSearch(num_simulations=SIMS, root_exploration_fraction=0.25)
    for b in range(B):
        ref = reference.search(model.row(b), obs[b:b + 1], legal=legal[b].tolist(),
                               noise=noise[b].tolist())
        assert out.visit_counts[b].tolist() == ref["visits"]


@pytest.mark.parametrize("selection", ["visit_count", "gumbel"])
def test_deterministic_given_the_generator(selection):
    model, obs, legal = _inputs(4)
    search = TreeSearch(num_simulations=20, action_selection=selection, max_considered_actions=4)
    run = lambda s: search.search(model, obs, legal, torch.Generator().manual_seed(s))  # noqa: E731
    first, again, other = run(7), run(7), run(8)
    for x, y in zip(first, again):
        assert torch.equal(x, y)
    assert not all(torch.equal(x, y) for x, y in zip(first, other))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("selection", ["visit_count", "gumbel"])
def test_searches_on_the_inputs_device(selection):
    """On CUDA the search's tensors live on the model's device and build the trees the
    CPU builds (float64: no near-tie splits)."""
    model, obs, legal = _inputs(6)
    cuda = RandomModel(B, A, params={k: v.cuda() for k, v in model.p.items()})
    search = TreeSearch(num_simulations=SIMS, action_selection=selection, temperature=0.0,
                        root_exploration_fraction=0.0, gumbel_scale=0.0)
    on_cpu = search.search(model, obs, legal)
    on_gpu = search.search(cuda, obs.cuda(), legal.cuda(),
                           generator=torch.Generator(device="cuda").manual_seed(0))
    assert on_gpu.visit_counts.device.type == "cuda"
    assert on_gpu.visit_counts.cpu().tolist() == on_cpu.visit_counts.tolist()
    assert on_gpu.action.cpu().tolist() == on_cpu.action.tolist()


def test_same_tree_with_the_same_gumbel_draw():
    """Gumbel mode draws its Gumbel noise first from the generator: the reference given
    that draw grows the same trees and takes the same actions."""
    model, obs, legal = _inputs(8)
    kw = dict(num_simulations=SIMS, action_selection="gumbel", max_considered_actions=4)
    out = TreeSearch(**kw).search(model, obs, legal, torch.Generator().manual_seed(9))
    g = sample_gumbel(torch.Size([B, A]), torch.float64, torch.device("cpu"),
                      torch.Generator().manual_seed(9))
    reference = ReferenceSearch(**kw)
    for b in range(B):
        ref = reference.search(model.row(b), obs[b:b + 1], legal=legal[b].tolist(),
                               gumbel=g[b].tolist())
        assert out.visit_counts[b].tolist() == ref["visits"]
        assert int(out.action[b]) == ref["action"]
