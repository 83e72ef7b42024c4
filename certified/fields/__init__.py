"""Vector fields as data: expression graphs with piecewise-constant parameters.

A new field is a few lines::

    from certified.fields import field, sin
    pendulum = field(2, lambda x, p: [x[1], -sin(x[0]) - p.gamma * x[1] + p.torque],
                     parameters=["gamma", "torque"])
    problem = pendulum.on((1, {"gamma": "0.1", "torque": "0.5"}),
                          (1, {"gamma": "0.1", "torque": 0}))

and :func:`certified.flow.enclose_flow` certifies its flow; its certificate is checked by the
generic rule of the checker (the graph is data, not code).
"""

from certified.fields.attention import attention_field
from certified.fields.examples import (
    EXAMPLES,
    lorenz,
    neural_field,
    rossler,
    sphere_neural_field,
    vanderpol,
)
from certified.fields.expr import (
    Expr,
    GraphBuilder,
    cos,
    exp,
    log,
    logsumexp,
    sigmoid,
    sin,
    softmax,
    sqrt,
    tanh,
    total,
)
from certified.fields.field import (
    FieldError,
    FieldPiece,
    PiecewiseField,
    VectorField,
    field,
    read_field,
)

__all__ = [
    "EXAMPLES",
    "attention_field",
    "Expr",
    "FieldError",
    "FieldPiece",
    "GraphBuilder",
    "PiecewiseField",
    "VectorField",
    "cos",
    "exp",
    "field",
    "log",
    "logsumexp",
    "lorenz",
    "neural_field",
    "read_field",
    "rossler",
    "sigmoid",
    "sin",
    "softmax",
    "sphere_neural_field",
    "sqrt",
    "tanh",
    "total",
    "vanderpol",
]
