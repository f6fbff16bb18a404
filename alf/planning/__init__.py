"""Planners that algorithms call from their hooks: the batched tree search (MCTS with pUCT
and Gumbel MuZero's root) and its plain-Python reference. docs/design/tree_search.md."""
