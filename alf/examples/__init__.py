"""Example experiments: ``*.gin`` files (resolvable by bare name) and example algorithms.

A package (rather than a plain folder) so a gin file can load an example
algorithm with gin's import statement, e.g. ``import alf.examples.reinforce_algorithm``
at the top of ``reinforce_cart_pole.gin``, and so the ``.py`` examples ship
with the installed package.
"""
