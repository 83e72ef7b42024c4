"""The layer-stack strategies are public from ``certified.strategies`` (where users look for
every strategy of the package) and draw models that the stack reader accepts."""

from hypothesis import given, settings

import certified.strategies as strategies
from certified.transformers.stack_model import parse_stack


def test_exported():
    assert {"stack_models", "token_sets"} <= set(strategies.__all__)


@settings(max_examples=10, deadline=None)
@given(strategies.stack_models(d=3, n=4, max_layers=3), strategies.token_sets(4, 3, scale=1.0))
def test_drawn_models_parse_and_tokens_have_the_shape(model, tokens):
    stack = parse_stack(model)
    assert stack is not None
    assert len(tokens) == 4 and all(len(row) == 3 for row in tokens)
    assert all(-1.0 <= v <= 1.0 for row in tokens for v in row)
