"""TreeSearch is a gin configurable: bound in a config, range-checked at parse time,
and a bad selection mode is one clear error."""
import gin
import pytest
import torch

from alf import config as alf_config
from alf.errors import ConfigError
from alf.planning.tree_search import TreeSearch
from tests.planning.toy_models import BanditModel


def test_bound_from_gin():
    try:
        alf_config.parse_config(conf_params=["TreeSearch.num_simulations = 7",
                                             "TreeSearch.action_selection = 'gumbel'"])
        search = gin.get_configurable("TreeSearch")()
        out = search.search(BanditModel([0.0, 1.0]), torch.zeros(2, 1))
        assert out.visit_counts.sum(-1).tolist() == [7, 7]
        assert out.action.tolist() == [1, 1]
    finally:
        gin.clear_config()


def test_out_of_range_and_unknown_values_are_refused():
    try:
        with pytest.raises(ConfigError, match="discount"):
            alf_config.parse_config(conf_params=["TreeSearch.discount = 1.5"])
    finally:
        gin.clear_config()
    with pytest.raises(ConfigError, match="action_selection"):
        TreeSearch(action_selection="ucb")
