"""``alf.utils.signatures``: the one helper that decides which optional arguments
(``config``, ``is_eval``) a builder passes to a constructor; ``alf.experiment`` and the
Agent both use it."""
from alf.algorithms import agent_checks
from alf.algorithms.ppo_algorithm import PPOAlgorithm
from alf import experiment
from alf.utils.signatures import eval_kwargs, takes_argument


class _Old:
    def __init__(self, observation_spec, action_spec, config=None):
        pass


def _mine(observation_spec, action_spec):
    pass


def test_takes_argument_reads_the_signature():
    assert takes_argument(_Old, "config") and not takes_argument(_Old, "is_eval")
    assert takes_argument(PPOAlgorithm, "is_eval")
    assert not takes_argument(_mine, "config")
    assert not takes_argument(dict, "is_eval")  # no readable signature: ValueError
    assert not takes_argument(object(), "config")  # not callable: TypeError


def test_eval_kwargs_only_for_an_eval_build_of_a_ctor_that_declares_it():
    assert eval_kwargs(PPOAlgorithm, True) == {"is_eval": True}
    assert eval_kwargs(PPOAlgorithm, False) == {}
    assert eval_kwargs(_Old, True) == {} == eval_kwargs(_mine, True)


def test_one_copy():
    assert agent_checks.eval_kwargs is eval_kwargs
    assert not hasattr(experiment, "_takes")
