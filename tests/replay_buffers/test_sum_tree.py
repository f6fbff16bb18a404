"""SumTree: exact sums, last-write-wins, interval semantics of sampling, frequencies, masking."""
import io

import pytest
import torch

from alf.replay_buffers.sum_tree import SumTree

FANOUTS = [2, 4, 16]


def _reference_sample(values: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Leaf i such that u in [sum(v[:i]), sum(v[:i+1])), by brute force."""
    return torch.searchsorted(torch.cumsum(values, 0), u, right=True)


@pytest.mark.parametrize("fanout", FANOUTS)
def test_set_get_total_and_padding(fanout):
    tree = SumTree(5, fanout=fanout)
    assert tree.num_leaves == 8 and tree.capacity == 5
    assert tree.total().item() == 0.0 and tree.max_value().item() == 1.0
    tree.set(torch.tensor([0, 3, 4]), torch.tensor([1.5, 2.0, 0.25]))
    assert torch.equal(tree.get(torch.arange(5)),
                       torch.tensor([1.5, 0, 0, 2.0, 0.25], dtype=torch.float64))
    assert tree.total().item() == 3.75
    assert tree.max_value().item() == 2.0
    tree.set(torch.tensor([3]), 0.5)  # lowering a value does not lower the max ever set
    assert tree.total().item() == 2.25 and tree.max_value().item() == 2.0
    tree.clear()
    assert tree.total().item() == 0.0 and tree.max_value().item() == 2.0


def test_duplicates_last_write_wins():
    tree = SumTree(8)
    tree.set(torch.tensor([2, 5, 2, 2, 5]), torch.tensor([1.0, 2.0, 3.0, 4.0, 7.0]))
    assert tree.get(torch.tensor([2, 5])).tolist() == [4.0, 7.0]
    assert tree.total().item() == 11.0
    # the max is over what was passed (a value overwritten in the same call still counts)
    assert tree.max_value().item() == 7.0


@pytest.mark.parametrize("fanout", FANOUTS)
def test_inner_nodes_are_sums_after_many_random_updates(fanout):
    gen = torch.Generator().manual_seed(0)
    tree = SumTree(1000, fanout=fanout)
    values = torch.zeros(1000, dtype=torch.float64)
    for _ in range(50):
        idx = torch.randint(0, 1000, (64,), generator=gen)
        v = torch.rand(64, generator=gen, dtype=torch.float64)
        tree.set(idx, v)
        last = {}
        for i, x in zip(idx.tolist(), v.tolist()):
            last[i] = x
        for i, x in last.items():
            values[i] = x
    assert torch.equal(tree.get(torch.arange(1000)), values)
    assert abs(tree.total().item() - values.sum().item()) < 1e-9
    # every inner level is the sum of its groups below
    for j, group in enumerate(tree._groups):
        assert torch.allclose(group.sum(1), tree._levels[j + 1], rtol=0, atol=1e-12)


@pytest.mark.parametrize("fanout", FANOUTS)
def test_sample_maps_u_to_the_leaf_interval(fanout):
    gen = torch.Generator().manual_seed(1)
    n = 300
    values = torch.rand(n, generator=gen, dtype=torch.float64)
    values[torch.randperm(n, generator=gen)[:100]] = 0.0  # a third are empty
    tree = SumTree(n, fanout=fanout)
    tree.set(torch.arange(n), values)
    u = torch.rand(5000, generator=gen, dtype=torch.float64) * tree.total()
    got = tree.sample(u)
    ref = _reference_sample(values, u)
    # the two cumulative sums round differently: allow disagreement only within 1e-9 of a boundary
    cum = torch.cumsum(values, 0)
    near_edge = (torch.abs(cum[None, :] - u[:, None]) < 1e-9).any(1)
    assert bool(((got == ref) | near_edge).all())
    assert bool((values[got] > 0).all())


@pytest.mark.parametrize("fanout", FANOUTS)
def test_zero_leaves_are_never_sampled_even_at_the_edges(fanout):
    values = torch.tensor([0.0, 1e-300, 0.0, 3.0, 0.0, 0.0, 0.1, 0.0, 0.0], dtype=torch.float64)
    tree = SumTree(9, fanout=fanout)
    tree.set(torch.arange(9), values)
    total = tree.total()
    edges = torch.tensor([0.0, 1e-300, 3.0, total.item(), torch.nextafter(total, torch.tensor(0.0,
                          dtype=torch.float64)).item(), 2 * total.item()], dtype=torch.float64)
    got = tree.sample(edges)
    assert bool((values[got] > 0).all()), got
    assert got[-1].item() == 6  # rounding past the end falls back to the last positive leaf


@pytest.mark.parametrize("fanout", [2, 16])
def test_sampling_frequencies_match_values_chi_square(fanout):
    values = torch.tensor([1.0, 0.0, 2.0, 4.0, 0.5, 0.0, 8.0, 0.5, 3.0, 1.0], dtype=torch.float64)
    tree = SumTree(10, fanout=fanout)
    tree.set(torch.arange(10), values)
    gen = torch.Generator().manual_seed(2)
    n = 200_000
    leaves = tree.sample(torch.rand(n, generator=gen, dtype=torch.float64) * tree.total())
    counts = torch.bincount(leaves, minlength=10).double()
    expected = n * values / values.sum()
    assert counts[values == 0].sum().item() == 0
    pos = values > 0
    chi2 = (((counts[pos] - expected[pos]) ** 2) / expected[pos]).sum().item()
    assert chi2 < 20.1  # 7 degrees of freedom: p = 0.005


def test_masked_hides_leaves_and_restores_the_tree_bit_for_bit():
    gen = torch.Generator().manual_seed(3)
    tree = SumTree(100)
    tree.set(torch.arange(100), torch.rand(100, generator=gen, dtype=torch.float64) + 0.1)
    before = tree.state_dict()["tree"].clone()
    max_before = tree.max_value().clone()
    hidden = torch.tensor([0, 17, 99, 50])
    with tree.masked(hidden):
        assert bool((tree.get(hidden) == 0).all())
        leaves = tree.sample(torch.rand(20_000, generator=gen, dtype=torch.float64) * tree.total())
        assert not bool(torch.isin(leaves, hidden).any())
    assert torch.equal(tree.state_dict()["tree"], before)
    assert torch.equal(tree.max_value(), max_before)


def test_state_dict_round_trip():
    tree = SumTree(37)
    tree.set(torch.arange(0, 37, 3), torch.linspace(0.5, 9.0, 13))
    blob = io.BytesIO()
    torch.save(tree.state_dict(), blob)
    blob.seek(0)
    fresh = SumTree(37)
    fresh.load_state_dict(torch.load(blob, weights_only=True))
    assert torch.equal(fresh.state_dict()["tree"], tree.state_dict()["tree"])
    assert fresh.max_value().item() == 9.0
    u = torch.rand(100, dtype=torch.float64) * tree.total()
    assert torch.equal(fresh.sample(u), tree.sample(u))
    with pytest.raises(ValueError, match="expected"):
        SumTree(100).load_state_dict(tree.state_dict())


def test_capacity_one_and_argument_checks():
    tree = SumTree(1)
    tree.set(torch.tensor([0]), 2.0)
    assert tree.sample(torch.tensor([0.0, 1.9], dtype=torch.float64)).tolist() == [0, 0]
    with pytest.raises(ValueError, match="power of two"):
        SumTree(10, fanout=3)
    with pytest.raises(ValueError, match="capacity"):
        SumTree(0)
    assert SumTree.nbytes_for(1_000_000) == SumTree(1_000_000).nbytes
